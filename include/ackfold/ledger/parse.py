"""What a user asks of the ledger, checked before any table is opened.

Times, statuses, limits and root ids as the CLI and the UI take them, and `RootQuery`,
what `ackfold roots` asks for. A malformed value raises `QueryError` with the fix (the
CLI exits with 2, the UI answers 400); only typed values come out, so nothing here is
ever pasted into SQL as the user typed it.

Example:
    >>> from ackfold.ledger.parse import RootQuery, parse_root_id
    >>> RootQuery.parse(statuses=["failed,timed_out"], since="2026-11-22T10:00:00+01:00")
    ... # doctest: +NORMALIZE_WHITESPACE
    RootQuery(statuses=('failed', 'timed_out'), app=None,
              since=datetime.datetime(2026, 11, 22, 9, 0, tzinfo=datetime.timezone.utc), limit=50)
    >>> parse_root_id("0xffffffffffffffff")
    -1
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from ackfold.ledger import status

DEFAULT_LIMIT: Final = 50
_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_TIME_EXAMPLE: Final = "2026-11-22T10:00:00Z"
_DECIMAL = re.compile(r"^[+-]?\d+$")
_HEX = re.compile(r"^0[xX][0-9a-fA-F]{1,16}$")


class QueryError(ValueError):
    """A malformed request (bad status, time, limit or root id): the CLI exits with 2."""


def parse_time(text: str, option: str = "--since") -> datetime:
    """An ISO-8601 time as an aware UTC datetime: `Z` and offsets are honoured, naive is UTC.

    Example:
        >>> parse_time("2026-11-22T10:00:00Z")
        datetime.datetime(2026, 11, 22, 10, 0, tzinfo=datetime.timezone.utc)
        >>> parse_time("2026-11-22 11:30+01:30").isoformat()
        '2026-11-22T10:00:00+00:00'
        >>> parse_time("yesterday")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ackfold.ledger.parse.QueryError: --since 'yesterday' is not an ISO-8601 time, e.g. ...
    """
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise QueryError(
            f"{option} '{text}' is not an ISO-8601 time, e.g. {_TIME_EXAMPLE}"
        ) from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def parse_statuses(values: Iterable[str]) -> tuple[str, ...]:
    """Statuses from repeated and comma-separated `--status` values, checked against
    `status.ALL`, in the order given and without repeats.

    Example:
        >>> parse_statuses(["failed, timed_out", "failed"])
        ('failed', 'timed_out')
    """
    valid = ", ".join(status.ALL)
    chosen: list[str] = []
    for value in values:
        for part in value.split(","):
            name = part.strip().lower()
            if not name:
                continue
            if name not in status.ALL:
                raise QueryError(f"unknown status '{part.strip()}': valid statuses are {valid}")
            if name not in chosen:
                chosen.append(name)
    if not chosen:
        raise QueryError(f"--status needs at least one status: valid statuses are {valid}")
    return tuple(chosen)


def parse_limit(text: str | int) -> int:
    """A positive number of roots.

    Example:
        >>> parse_limit("20")
        20
    """
    try:
        limit = int(str(text).strip())
    except ValueError:
        raise QueryError(f"--limit '{text}' is not a whole number") from None
    if limit <= 0:
        raise QueryError(f"--limit must be a positive number of roots, got {limit}")
    return limit


def parse_root_id(text: str) -> int:
    """A root id as `root_state` stores it (signed 64-bit), from its decimal form or from
    the `0x%016x` form that ackfold's messages print.

    Example:
        >>> parse_root_id("-42"), parse_root_id("0x000000000000002a")
        (-42, 42)
    """
    value = text.strip()
    if _DECIMAL.match(value):
        number = int(value)
        if not _I64_MIN <= number <= _I64_MAX:
            raise QueryError(f"root id {value} is out of range: root ids are signed 64-bit")
        return number
    if _HEX.match(value):
        unsigned = int(value, 16)
        return unsigned - (1 << 64) if unsigned > _I64_MAX else unsigned
    raise QueryError(
        f"root id '{text}' is not a number: give the decimal id that `ackfold roots` "
        "lists (or its 0x hex form)"
    )


@dataclass(frozen=True)
class RootQuery:
    """What `ackfold roots` asks for. Build it with `RootQuery.parse` from user input."""

    statuses: tuple[str, ...] = ()
    app: str | None = None
    since: datetime | None = None
    limit: int = DEFAULT_LIMIT

    @classmethod
    def parse(
        cls,
        *,
        statuses: Sequence[str] | None = None,
        app: str | None = None,
        since: str | None = None,
        limit: str | int | None = None,
    ) -> RootQuery:
        """Check the user's values; raise `QueryError` with the fix for the first bad one."""
        if app is not None and not app.strip():
            raise QueryError("--app needs an app name")
        return cls(
            statuses=parse_statuses(statuses) if statuses else (),
            app=app.strip() if app is not None else None,
            since=parse_time(since) if since is not None else None,
            limit=parse_limit(limit) if limit is not None else DEFAULT_LIMIT,
        )
