"""What a user asks of the ledger, checked before any table is opened.

Times, statuses, limits, rates and root ids as the CLI, the UI, the manual replay DAG and
the configuration take them, and `RootQuery`, what `ackfold roots` asks for. A malformed
value raises `QueryError` with the fix (the CLI exits with 2, the UI answers 400, the DAG's
`validate` task fails at once); only typed values come out, so nothing here is ever pasted
into SQL as the user typed it.

The bounds are defined here, once, for every entry point:

- times: from `EARLIEST` (1970-01-01) up to `LATEST` (2200-01-01), UTC;
- limits: 1 to `MAX_LIMIT` (10,000,000) roots;
- rates: `MIN_RATE` (0.1) to `MAX_RATE` (100,000) messages per second, for `--rate`,
  the DAG's `rate` and the `replay_rate` setting alike.

Example:
    >>> from ackfold.ledger.reading.parse import RootQuery, parse_root_id
    >>> RootQuery.parse(statuses=["failed,timed_out"], since="2026-11-22T10:00:00+01:00")
    ... # doctest: +NORMALIZE_WHITESPACE
    RootQuery(statuses=('failed', 'timed_out'), app=None,
              since=datetime.datetime(2026, 11, 22, 9, 0, tzinfo=datetime.timezone.utc), limit=50)
    >>> parse_root_id("0xffffffffffffffff")
    -1
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from ackfold.config.values import MAX_RATE, MIN_RATE
from ackfold.errors import AckfoldError
from ackfold.ledger.schema import ids, status

DEFAULT_LIMIT: Final = 50
EARLIEST: Final = datetime(1970, 1, 1, tzinfo=UTC)
LATEST: Final = datetime(2200, 1, 1, tzinfo=UTC)
# Spark takes a limit as a 32-bit int; far more than one replay should send anyway.
MAX_LIMIT: Final = 10_000_000
_TIME_EXAMPLE: Final = "2026-11-22T10:00:00Z"


class QueryError(AckfoldError, ValueError):
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
        ackfold.ledger.reading.parse.QueryError: --since 'yesterday' is not an ISO-8601 time...
        >>> parse_time("0001-01-01T00:00:00+01:00")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ackfold.ledger.reading.parse.QueryError: --since '0001-01-01T00:00:00+01:00' is out...
    """
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise QueryError(
            f"{option} '{_shown(text)}' is not an ISO-8601 time, e.g. {_TIME_EXAMPLE}"
        ) from None
    # The year first: an offset at the calendar's edge (year 1 or 9999) cannot convert.
    if EARLIEST.year - 1 <= parsed.year <= LATEST.year:
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            parsed = parsed.replace(tzinfo=UTC)
        else:
            parsed = parsed.astimezone(UTC)
        if EARLIEST <= parsed < LATEST:
            return parsed
    raise QueryError(
        f"{option} '{_shown(text)}' is out of range: give a time from "
        f"{EARLIEST:%Y-%m-%d} up to {LATEST:%Y-%m-%d} (UTC)"
    )


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


def parse_limit(text: str | int, option: str = "--limit") -> int:
    """A number of roots, from 1 to `MAX_LIMIT`.

    Example:
        >>> parse_limit("20")
        20
        >>> parse_limit("3000000000")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ackfold.ledger.reading.parse.QueryError: --limit must be from 1 to 10,000,000 roots, got ...
    """
    try:
        limit = int(str(text).strip())
    except ValueError:
        raise QueryError(f"{option} '{_shown(text)}' is not a whole number") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"{option} must be from 1 to {MAX_LIMIT:,} roots, got {_shown(limit)}")
    return limit


def parse_rate(value: str | float, option: str = "--rate") -> float:
    """A replay rate in messages per second, from `MIN_RATE` to `MAX_RATE`: a number, or
    its text. `option` names it in the error ("" for none).

    Example:
        >>> parse_rate("250"), parse_rate(0.5)
        (250.0, 0.5)
        >>> parse_rate("1e-320")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ackfold.ledger.reading.parse.QueryError: --rate must be from 0.1 to 100,000 messages per ...
    """
    number: float
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise QueryError(f"{option} '{_shown(value)}' is not a number".lstrip()) from None
    else:
        number = value
    # A comparison, not float(): an integer too large for a float compares exactly, and
    # NaN fails it.
    if not MIN_RATE <= number <= MAX_RATE:
        raise QueryError(
            f"{option} must be from {MIN_RATE:g} to {MAX_RATE:,.0f} messages per second, "
            f"got {_shown(value)}".lstrip()
        )
    return float(number)


def _shown(value: object, most: int = 40) -> str:
    """`value` as text, cut to `most` characters: an error quotes it, never a whole page."""
    text = str(value)
    return text if len(text) <= most else f"{text[:most]}..."


def parse_root_id(text: str, what: str = "root id") -> int:
    """A root id as `root_state` stores it (signed 64-bit), from any form a person may
    paste (`ids.parse_id`: 0x hex as ackfold shows it, bare hex, signed or unsigned decimal).

    Example:
        >>> parse_root_id("-42"), parse_root_id("0x000000000000002a")
        (-42, 42)
    """
    try:
        return ids.parse_id(text, what)
    except ids.IdError as exc:
        raise QueryError(str(exc)) from None


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
