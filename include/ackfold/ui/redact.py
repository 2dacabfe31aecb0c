"""The payload preview of a root page: capped in size, with secrets masked.

The app masks fail reasons and event reasons with the same `Redactor.mask` (they can
quote the record a stage choked on), before any page, chart or JSON sees them; and the
sample rows of a root's effects in its outputs (`Redactor.row`): a column named like a
secret key, or `payload`, is masked whole, every other text value as a payload is.

Only the first `ui.payload_preview_chars` characters are shown, and the reader reads only
`MARGIN` characters more than that (never the whole payload). Masking runs on what was
read, before the cut, so that a value that starts before the cut is masked even where the
cut would split it:
- `ui.redact_keys`: the value of any JSON key of that name (any depth, any case) is
  replaced by `MASK`, whatever its type; a value the read text ends inside is masked to
  the end;
- `ui.redact_patterns`: every match of these regular expressions is replaced by `MASK`
  (a match that needs more than `MARGIN` characters past the cut is not seen).

Example:
    >>> Redactor(keys=("password",)).preview('{"user": "ann", "Password": "hunter2"}', 100)
    Preview(text='{"user": "ann", "Password": ***}', chars=38, truncated=False, masked=1)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ackfold.config.sections import UiSettings
    from ackfold.ledger.reading.rows import Journey, RootState

MASK: Final = "***"
MARGIN: Final = 1024
# A column an output row never shows: the message itself (payloads are not shown).
PAYLOAD_COLUMNS: Final = ("payload",)
_OPEN: Final = {"{": "}", "[": "]"}
_SCALAR: Final = re.compile(r"[^,}\]\s]*")


@dataclass(frozen=True)
class Preview:
    """What a root page shows of a payload of `chars` characters."""

    text: str
    chars: int
    truncated: bool
    masked: int


class Redactor:
    """Masks the values of `keys` and the matches of `patterns` in payload text."""

    def __init__(self, keys: Sequence[str] = (), patterns: Sequence[str] = ()) -> None:
        self._names = {k.lower() for k in (*keys, *PAYLOAD_COLUMNS)}
        self._key = (
            re.compile(r'"(?:' + "|".join(re.escape(k) for k in keys) + r')"\s*:\s*', re.IGNORECASE)
            if keys
            else None
        )
        self._patterns = [re.compile(p) for p in patterns]

    def preview(self, text: str, limit: int, chars: int | None = None) -> Preview:
        """The first `limit` characters of `text` once masked; `chars` is the payload's
        full length when `text` is only its beginning."""
        total = len(text) if chars is None else chars
        masked, count = self.mask(text)
        return Preview(masked[:limit], total, total > limit or len(masked) > limit, count)

    def row(self, row: Mapping[str, Any], limit: int) -> dict[str, str | None]:
        """An output row as a page shows it: every value as text of at most `limit`
        characters, masked; a column named like a secret key or a payload masked whole.

        Example:
            >>> Redactor(keys=("token",)).row({"word": "ok", "Token": "t0k", "n": 2}, 10)
            {'word': 'ok', 'Token': '***', 'n': '2'}
        """
        shown: dict[str, str | None] = {}
        for name, value in row.items():
            if value is None:
                shown[name] = None
            elif name.lower() in self._names:
                shown[name] = MASK
            else:
                text = value if isinstance(value, str) else str(value)
                # Read past the cut, as the payload preview does: a secret it would split.
                masked = self.mask(text[: limit + MARGIN])[0]
                shown[name] = masked if len(masked) <= limit else masked[: limit - 1] + "…"
        return shown

    def mask(self, text: str) -> tuple[str, int]:
        """`text` with every secret replaced by `MASK`, and how many were."""
        count = 0
        if self._key is not None:
            out, position = [], 0
            for match in self._key.finditer(text):
                if match.start() < position:
                    continue  # inside a value already masked
                end = _value_end(text, match.end())
                out += [text[position : match.end()], MASK]
                position = end
                count += 1
            text = "".join(out) + text[position:]
        for pattern in self._patterns:
            text, n = pattern.subn(MASK, text)
            count += n
        return text, count


def _value_end(text: str, start: int) -> int:
    """Where the JSON value that starts at `start` ends (the end of `text` if it is cut)."""
    if start >= len(text):
        return start
    first = text[start]
    if first == '"':
        return _string_end(text, start)
    if first in _OPEN:
        depth, i = 0, start
        while i < len(text):
            char = text[i]
            if char == '"':
                i = _string_end(text, i)
                continue
            if char in "{[":
                depth += 1
            elif char in "}]":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return len(text)
    match = _SCALAR.match(text, start)
    return match.end() if match else start


def _string_end(text: str, start: int) -> int:
    """The index after the closing quote of the string opening at `start`."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return len(text)


def redactor_for(ui: UiSettings) -> Redactor:
    """The redactor of the configured `ui.redact_keys` and `ui.redact_patterns`."""
    return Redactor(ui.redact_keys, ui.redact_patterns)


def masked_text(redactor: Redactor, text: str | None) -> str | None:
    return None if text is None else redactor.mask(text)[0]


def masked_state(redactor: Redactor, state: RootState) -> RootState:
    """`state` with its fail reason masked (it can quote the record a stage choked on)."""
    return replace(state, fail_reason=masked_text(redactor, state.fail_reason))


def masked_journey(redactor: Redactor, journey: Journey, *, payload: bool = False) -> Journey:
    """`journey` with its fail reason and its events' reasons masked, and with `payload`
    its payload preview too (the UI masks that itself, past its own cut)."""
    source = journey.source
    if payload and source is not None:
        source = replace(source, payload_preview=masked_text(redactor, source.payload_preview))
    return replace(
        journey,
        state=masked_state(redactor, journey.state),
        events=[replace(e, reason=masked_text(redactor, e.reason)) for e in journey.events],
        source=source,
    )
