"""What the Reliability UI shows of a root's effects: its origin's rows in each declared
output of its app (`ackfold.effects`), masked like payloads.

- a root's page: per output, the row count and a few rows (`root_effects`), as text
  masked by the `Redactor` (a column named like a secret key, or `payload`, whole); no
  rows at all while `ui.payload_preview_chars` is 0 (previews off): counts only;
- the failed roots and the dead letters: per dead letter on the page, whether it left
  effects (`dead_letter_flags`): one read per output for the page's rows only, never the
  whole ledger, so a page costs the same at 10M roots as at 10.

The outputs are read by `ackfold.effects.find_effects` (delta-rs, origins as values,
never SQL text). An output that cannot be read says why on its line; it never fails the
page.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from ackfold.ledger.schema import status
from ackfold.ledger.schema.ids import format_id

if TYPE_CHECKING:
    from ackfold.config import Settings
    from ackfold.effects import OutputEffects, RootEffects
    from ackfold.ledger.reading.rows import RootState
    from ackfold.ui.redact import Redactor
    from ackfold.ui.results import DeadLetter

# Sample rows a root's page shows per output, and the characters of one value.
SAMPLE_ROWS: Final = 3
VALUE_CHARS: Final = 120


@dataclass(frozen=True)
class Flag:
    """Whether a dead letter left effects: `rows` in the `outputs` its app declares that
    no stage reads (a sink's tables: what people read, and what a retract takes away);
    `kept` its rows in the tables a stage reads (a retract leaves those); `problem` when
    an output could not be read (then `rows` counts only the others)."""

    rows: int
    outputs: int
    problem: bool = False
    kept: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "has_effects": self.rows > 0,
            "rows": self.rows,
            "read_by_stage_rows": self.kept,
            "outputs": self.outputs,
            "unreadable": self.problem,
        }


def root_effects(
    settings: Settings | None, redactor: Redactor, root: RootState, *, value_chars: int
) -> RootEffects | None:
    """The effects of `root` with its sample rows masked; None without
    settings or an origin. `value_chars` 0: counts only (previews are off)."""
    if settings is None or root.origin_root_id is None:
        return None
    from ackfold.effects import RootRef, find_effects

    ref = RootRef(root.root_id, root.app, root.origin_root_id, root.attempt, root.status)
    sample = SAMPLE_ROWS if value_chars else 0
    (found,) = find_effects(settings, [ref], sample=sample)
    return masked_effects(redactor, found, min(value_chars, VALUE_CHARS))


def masked_effects(redactor: Redactor, found: RootEffects, value_chars: int) -> RootEffects:
    """`found` with each sample row as masked text, without its origin column (the same
    on every row: the page says it once); none when `value_chars` is 0."""

    def shown(o: OutputEffects) -> tuple[dict[str, str | None], ...]:
        if not value_chars:
            return ()
        origin = o.output.origin_column
        return tuple(
            redactor.row({k: v for k, v in row.items() if k != origin}, value_chars)
            for row in o.sample
        )

    return replace(found, outputs=tuple(replace(o, sample=shown(o)) for o in found.outputs))


def dead_letter_flags(
    settings: Settings | None, roots: Iterable[RootState | DeadLetter]
) -> dict[int, Flag]:
    """For each dead letter among `roots` (`RootState` or `DeadLetter` rows of one page),
    whether it left effects, by root id. Counts only, one read per declared output for
    all of them. Other roots are left out: one still in progress may yet write, and a
    redriven dead letter's origin rows are its new attempt's too."""
    if settings is None:
        return {}
    from ackfold.effects import RootRef, find_effects

    refs = [
        RootRef(r.root_id, r.app, r.origin_root_id, r.attempt, status.DEAD_LETTERED)
        for r in roots
        if getattr(r, "status", status.DEAD_LETTERED) == status.DEAD_LETTERED
        and getattr(r, "redriven_at", None) is None
        and r.origin_root_id is not None
    ]
    if not refs:
        return {}
    return {
        e.root.root_id: Flag(
            e.retractable_rows, len(e.outputs), bool(e.problems), e.rows - e.retractable_rows
        )
        for e in find_effects(settings, refs, sample=0)
    }


def flags_json(flags: dict[int, Flag]) -> dict[str, Any]:
    """`flags` by root id as ackfold shows ids (JSON-ready)."""
    return {format_id(root_id): flag.to_json() for root_id, flag in flags.items()}
