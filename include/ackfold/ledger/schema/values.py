"""Ledger values as ackfold shows them: 64-bit ids in 0x hex, times in UTC ISO-8601, text
safe for one terminal line, and values as JSON.

Delta timestamps are UTC instants: `utc` makes every one an aware UTC datetime.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, Final

_MASK64: Final = (1 << 64) - 1
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def whoami() -> str:
    """Who asks, as the logs record a person at the command line: `cli:<user>`."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def hex64(value: int) -> str:
    """A 64-bit value as ackfold prints it: 0x and 16 hex digits, two's complement.

    Example:
        >>> hex64(-1), hex64(255)
        ('0xffffffffffffffff', '0x00000000000000ff')
    """
    return f"0x{value & _MASK64:016x}"


def iso(moment: datetime | None, *, precise: bool = False) -> str:
    """UTC ISO-8601 with a Z: milliseconds for people, microseconds with `precise`.

    Example:
        >>> from datetime import datetime, timezone
        >>> iso(datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone.utc))
        '2026-11-22T10:00:00.123Z'
    """
    if moment is None:
        return "-"
    text = moment.astimezone(UTC).isoformat(timespec="microseconds" if precise else "milliseconds")
    return text.replace("+00:00", "Z")


def one_line(text: str | None, width: int | None = None) -> str:
    """`text` safe for one terminal line: control characters escaped, capped at `width`.

    Example:
        >>> print(one_line("bad\\nrecord\\x1b[31m"))
        bad\\nrecord\\u001b[31m
        >>> one_line("x" * 10, width=8)
        'xxxxx...'
    """
    if text is None:
        return "-"
    out = []
    for char in text:
        if char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 or char in _BIDI:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    line = "".join(out)
    if width is not None and len(line) > width:
        line = line[: max(0, width - 3)] + "..."
    return line


def utc(moment: datetime) -> datetime:
    """Delta timestamps are UTC instants; a naive one (timestamp_ntz) is read as UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def jsonable(value: Any) -> Any:
    """`value` ready for JSON: a datetime as ISO-8601 UTC to the microsecond, a date as
    ISO-8601, anything else as it is."""
    if isinstance(value, datetime):
        return iso(value, precise=True)
    if isinstance(value, date):
        return value.isoformat()
    return value
