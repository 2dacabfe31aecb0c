"""Read the ledger without a JVM: what `ackfold roots` and `ackfold show` print.

Queries run in delta-rs (`deltalake.QueryBuilder`, DataFusion SQL), so the CLI and the UI
answer in a fraction of a second without Spark, pyarrow or pandas. Each query names its
columns (never `seen_event_hashes`; of `payload` only a capped preview, cut inside the scan)
and filters that delta-rs pushes down: `first_event_date` prunes partitions, the files'
min/max statistics in the Delta log prune files, parquet statistics prune row groups, and
the filter columns are decoded before the others.

- `roots` (list): newest `last_event_at` first. A lower bound on `last_event_at`, taken
  from the files' statistics and lowered until enough roots match, keeps a listing on the
  newest files however long the history is; `--since` is pushed down the same way.
- `show` (one root): `roots` by `root_id`; `ack_events` by `root_id` from the root's
  `ingested_at` on (append order makes older files skippable); `root_state` by `root_id`
  in the `first_event_date` partitions its events span (all partitions only if that
  misses); then its attempts, `roots` by `origin_root_id` from the first attempt on.
  Point lookups by `root_id` prune files only once the maintenance DAG has Z-ordered
  `roots` and `ack_events` by `root_id` (ids are hashes); before, they read the `root_id`
  column of every file in range and nothing else.

Inputs are checked before any table is opened: `QueryError` means the user asked
something malformed (exit 2), `LedgerError` that the ledger cannot answer (exit 1).

Example:
    >>> from ackfold.ledger.reader import RootQuery, parse_root_id
    >>> RootQuery.parse(statuses=["failed,timed_out"], since="2026-11-22T10:00:00+01:00")
    ... # doctest: +NORMALIZE_WHITESPACE
    RootQuery(statuses=('failed', 'timed_out'), app=None,
              since=datetime.datetime(2026, 11, 22, 9, 0, tzinfo=datetime.timezone.utc), limit=50)
    >>> parse_root_id("0xffffffffffffffff")
    -1
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from ackfold.ledger import status
from ackfold.ledger.tables import (
    ACK_EVENTS,
    QUALITY_RESULTS_DDL,
    ROOT_STATE,
    ROOTS,
    Ledger,
    column_specs,
)

DEFAULT_LIMIT: Final = 50
PAYLOAD_PREVIEW: Final = 200
# Events of a root are written after its spout registered it: only clock skew between
# the writers can put one before `ingested_at`. Events earlier than this are not looked at.
CLOCK_SKEW: Final = timedelta(days=1)
# Each retry of the top-N threshold covers this many times more rows than the last.
_WIDEN: Final = 8

_MASK64: Final = (1 << 64) - 1
_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_TIME_EXAMPLE: Final = "2026-11-22T10:00:00Z"
_DECIMAL = re.compile(r"^[+-]?\d+$")
_HEX = re.compile(r"^0[xX][0-9a-fA-F]{1,16}$")
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class QueryError(ValueError):
    """A malformed request (bad status, time, limit or root id): the CLI exits with 2."""


class LedgerError(Exception):
    """The ledger cannot answer: missing tables, an unknown root or app. Exit code 1."""


class NoLedger(LedgerError):
    """The ledger's tables do not exist yet, or hold no roots."""


class RootNotFound(LedgerError):
    """No `root_state` row for the requested root id."""


class UnknownApp(LedgerError):
    """No root of the requested app in `root_state`."""


# --- input ----------------------------------------------------------------------------


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
        ackfold.ledger.reader.QueryError: --since 'yesterday' is not an ISO-8601 time, e.g. ...
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


# --- results --------------------------------------------------------------------------


@dataclass(frozen=True)
class RootState:
    """A `root_state` row, without the reconciler's bookkeeping columns."""

    root_id: int
    app: str
    status: str
    xor_acc: int
    event_count: int
    first_event_at: datetime
    last_event_at: datetime
    status_changed_at: datetime
    attempt: int | None
    origin_root_id: int | None
    last_stage: str
    fail_reason: str | None
    fail_stage: str | None
    fail_at: datetime | None
    init_seen: bool
    first_event_date: date

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: times as ISO-8601 UTC, `xor_acc` as 0x hex, ids as integers."""
        out = {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}
        out["xor_acc"] = hex64(self.xor_acc)
        return out


STATE_COLUMNS: Final = tuple(f.name for f in fields(RootState))


@dataclass(frozen=True)
class RootPage:
    """One page of `ackfold roots`: `more` says that more roots matched than `limit`."""

    roots: list[RootState]
    more: bool
    query: RootQuery


@dataclass(frozen=True)
class Event:
    """One `ack_events` row of a root. `duplicate` marks a repeated `event_id`: the fold
    counts it once."""

    event_id: str
    kind: str
    stage: str
    event_time: datetime
    ack_val: int
    reason: str | None
    duplicate: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}
        out["ack_val"] = hex64(self.ack_val)
        return out


@dataclass(frozen=True)
class Source:
    """Where a root came from (its `roots` row). The payload is only ever a capped preview."""

    source: str
    source_queue: str | None
    source_message_id: str | None
    source_position: str | None
    ingested_at: datetime
    payload_preview: str | None
    payload_chars: int
    payload_truncated: bool

    def to_json(self) -> dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class Attempt:
    """One root of a replay chain. `status` is None while the root is not reconciled."""

    root_id: int
    attempt: int
    ingested_at: datetime | None
    status: str | None

    def to_json(self) -> dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class Journey:
    """Everything `ackfold show` prints about one root."""

    state: RootState
    source: Source | None
    events: list[Event]
    origin_root_id: int
    attempts: list[Attempt]

    @property
    def stages(self) -> list[tuple[str, list[Event]]]:
        """Events grouped by stage; stages in the order of their first event, events in
        time order."""
        groups: dict[str, list[Event]] = {}
        for event in self.events:
            groups.setdefault(event.stage, []).append(event)
        return list(groups.items())

    @property
    def unreconciled(self) -> int:
        """Distinct events in `ack_events` beyond those the last reconcile folded."""
        distinct = sum(1 for event in self.events if not event.duplicate)
        return max(0, distinct - self.state.event_count)

    def to_json(self) -> dict[str, Any]:
        return {
            "root_id": self.state.root_id,
            "root_id_hex": hex64(self.state.root_id),
            "state": self.state.to_json(),
            "source": self.source.to_json() if self.source else None,
            "stages": [
                {"stage": stage, "events": [event.to_json() for event in events]}
                for stage, events in self.stages
            ],
            "unreconciled_events": self.unreconciled,
            "origin_root_id": self.origin_root_id,
            "attempts": [attempt.to_json() for attempt in self.attempts],
        }


@dataclass(frozen=True)
class Scan:
    """One query this reader ran, for tests and for judging cost (see `explain`)."""

    table: str
    sql: str
    rows: int


class LedgerReader:
    """Read-only access to the ledger under `warehouse` (`Settings.table_root`).

    Queries run in delta-rs' DataFusion (`deltalake.QueryBuilder`): partition values and
    file statistics from the Delta log prune files, parquet statistics prune row groups,
    and the filter is evaluated before the other columns are decoded. `scans` records
    every query, and `explain(scan)` shows what it read.
    """

    def __init__(self, warehouse: str) -> None:
        self.ledger = Ledger(warehouse)
        self.warehouse = warehouse.rstrip("/")
        self.scans: list[Scan] = []
        self._tables: dict[str, Any] = {}
        self._builder: Any = None

    # tables and queries

    def _table(self, name: str, *, required: bool) -> Any:
        """The DeltaTable `name`, registered for SQL; None when it does not exist and is
        not `required`."""
        if self._tables.get(name) is not None or (name in self._tables and not required):
            return self._tables[name]
        from deltalake import DeltaTable, QueryBuilder
        from deltalake.exceptions import DeltaError, TableNotFoundError

        path = self.ledger.path(name)
        try:
            table: Any = DeltaTable(path)
        except TableNotFoundError:
            if required:
                raise NoLedger(
                    f"no ledger at {self.warehouse} (no table {name}): run `ackfold reconcile` "
                    "after an app has written events"
                ) from None
            table = None
        except (DeltaError, OSError) as exc:
            raise LedgerError(f"cannot read {path}: {_first_line(exc)}") from None
        if table is not None:
            if self._builder is None:
                # Evaluate filters inside the parquet scan, before decoding other columns.
                self._builder = QueryBuilder(
                    {
                        "datafusion.execution.parquet.pushdown_filters": "true",
                        "datafusion.execution.parquet.reorder_filters": "true",
                    }
                )
            with self._reading(name):
                self._builder.register(name, table)
        self._tables[name] = table
        return table

    @contextmanager
    def _reading(self, name: str) -> Iterator[None]:
        """Turn the errors of a damaged or unreadable table into one `LedgerError` line."""
        from deltalake.exceptions import DeltaError

        try:
            yield
        except (DeltaError, OSError) as exc:
            raise LedgerError(f"cannot read {self.ledger.path(name)}: {_first_line(exc)}") from None

    def _query(
        self,
        name: str,
        columns: Sequence[str],
        where: Sequence[str] = (),
        *,
        group: str | None = None,
        order: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        required: bool = False,
    ) -> list[dict[str, Any]]:
        """Rows of `SELECT columns FROM name WHERE where... GROUP BY group ORDER BY order
        LIMIT limit OFFSET offset`; no rows when the table does not exist and is not
        `required`."""
        if self._table(name, required=required) is None:
            return []
        # Names are this module's constants; every value is quoted by _sql_str, _sql_ts,
        # _sql_date or int(): user input never reaches the SQL unquoted.
        sql = f"SELECT {', '.join(columns)} FROM {name}"  # noqa: S608
        if where:
            sql += " WHERE " + " AND ".join(f"({condition})" for condition in where)
        if group:
            sql += f" GROUP BY {group}"
        if order:
            sql += f" ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if offset:
            sql += f" OFFSET {int(offset)}"
        with self._reading(name):
            result = self._builder.execute(sql).read_all()
        names = list(result.column_names)
        values = [result.column(i).to_pylist() for i in range(len(names))]
        rows = [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]
        self.scans.append(Scan(name, sql, len(rows)))
        return rows

    def explain(self, scan: Scan) -> str:
        """DataFusion's `EXPLAIN ANALYZE` of a query this reader ran: files and row groups
        it opened, pruned and scanned."""
        self._table(scan.table, required=True)
        with self._reading(scan.table):
            result = self._builder.execute(f"EXPLAIN ANALYZE {scan.sql}").read_all()
        return "\n".join(str(line) for line in result.column(1).to_pylist())

    # roots

    def list_roots(self, query: RootQuery) -> RootPage:
        """The newest roots (by `last_event_at`) that match `query`, at most `query.limit`.

        Raises `NoLedger` when `root_state` is missing or empty, `UnknownApp` when the app
        has no root at all.
        """
        want = query.limit + 1  # one more tells whether there are more
        where = []
        if query.statuses:
            where.append(f"status IN ({', '.join(_sql_str(s) for s in query.statuses)})")
        if query.app is not None:
            where.append(f"app = {_sql_str(query.app)}")
        if query.since is not None:
            where.append(f"last_event_at >= {_sql_ts(query.since)}")
        rows = self._newest(STATE_COLUMNS, where, want, since=query.since)
        if not rows:
            self._explain_empty(query)
        return RootPage(
            [_state(row) for row in rows[: query.limit]], len(rows) > query.limit, query
        )

    def _newest(
        self,
        columns: Sequence[str],
        where: Sequence[str],
        want: int,
        *,
        since: datetime | None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """`want` `root_state` rows matching `where` after the first `offset`, newest
        `last_event_at` first (ties by `root_id`), read under the tightest bound of
        `_bounds` that holds them; `since` is the caller's own lower bound, if any."""
        rows: list[dict[str, Any]] = []
        for bound in self._bounds(offset + want):
            if bound is not None and since is not None and bound <= since:
                bound = None  # the caller's bound already cuts deeper than this one
            extra = [f"last_event_at >= {_sql_ts(bound)}"] if bound is not None else []
            rows = self._query(
                ROOT_STATE,
                columns,
                [*where, *extra],
                order="last_event_at DESC, root_id ASC",
                limit=want,
                offset=offset,
                required=True,
            )
            if len(rows) >= want or bound is None:
                break
        return rows

    def _bounds(self, want: int) -> list[datetime | None]:
        """Lower bounds on `last_event_at` to try in turn, the last one None (no bound).

        From the files' `min.last_event_at` statistics in the Delta log: the first bound
        keeps whole files holding at least `want` roots (before the other filters), each
        next one `_WIDEN` times more. Any bound gives exact results when `want` roots match
        it: every root it leaves out is older than all of them.
        """
        table = self._table(ROOT_STATE, required=True)
        with self._reading(ROOT_STATE):
            actions = table.get_add_actions(flatten=True)
        column = "min.last_event_at"
        if column not in actions.column_names:
            return [None]
        lows = actions.column(column).to_pylist()
        counts = actions.column("num_records").to_pylist()
        if any(low is None for low in lows) or any(count is None for count in counts):
            return [None]  # a file without statistics: no bound is safe
        files = sorted(zip(lows, counts, strict=True), key=lambda pair: pair[0], reverse=True)
        bounds: list[datetime | None] = []
        covered, target = 0, want
        for low, count in files[:-1]:
            covered += count
            if covered >= target:
                bounds.append(_utc(low))
                target *= _WIDEN
        bounds.append(None)
        return bounds

    def _explain_empty(self, query: RootQuery) -> None:
        """Nothing matched: say why if the ledger is empty or the app unknown."""
        if not self._query(ROOT_STATE, ["root_id"], limit=1, required=True):
            raise NoLedger(
                f"no ledger at {self.warehouse}: {self.ledger.path(ROOT_STATE)} holds no roots "
                "yet; run `ackfold reconcile` after an app has written events"
            )
        if query.app is not None and not self._query(
            ROOT_STATE, ["app"], [f"app = {_sql_str(query.app)}"], limit=1
        ):
            known = ", ".join(one_line(app, 40) for app in self.known_apps())
            raise UnknownApp(f"no root of app {one_line(query.app, 40)}; known apps: {known}")

    def app_has_events(self, app: str) -> bool:
        """Whether `ack_events` holds any event of `app` (NoLedger when it does not exist)."""
        rows = self._query(ACK_EVENTS, ["app"], [f"app = {_sql_str(app)}"], limit=1, required=True)
        return bool(rows)

    def missing_roots(self, root_ids: Sequence[int]) -> list[int]:
        """The ids among `root_ids` that `root_state` has no row for (NoLedger if none)."""
        wanted = sorted({int(r) for r in root_ids})
        if not wanted:
            return []
        where = [f"root_id IN ({', '.join(str(r) for r in wanted)})"]
        found = {
            row["root_id"] for row in self._query(ROOT_STATE, ["root_id"], where, required=True)
        }
        return [r for r in wanted if r not in found]

    def known_apps(self) -> list[str]:
        """The apps that have roots in `root_state` (reads the `app` column only)."""
        rows = self._query(ROOT_STATE, ["DISTINCT app"], order="app", required=True)
        return [str(row["app"]) for row in rows]

    # one root

    def quality_run(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The `quality_results` rows of run `run_id`, or of the latest run; none if there
        is no such run (or no quality run yet)."""
        from ackfold.ledger.tables import QUALITY_RESULTS

        if run_id is None:
            latest = self._query(QUALITY_RESULTS, ["run_id"], order="run_at DESC", limit=1)
            if not latest:
                return []
            run_id = latest[0]["run_id"]
        columns = [name for name, _, _ in column_specs(QUALITY_RESULTS_DDL)]
        return self._query(
            QUALITY_RESULTS,
            columns,
            [f"run_id = {_sql_str(str(run_id))}"],
            order="suite, check_name",
        )

    def show_root(self, root_id: int, *, preview_chars: int = PAYLOAD_PREVIEW) -> Journey:
        """The journey of one root: its state, its events, where it came from, its attempts.
        Of the payload, only its first `preview_chars` characters are read.

        Raises `NoLedger` when `root_state` is missing, `RootNotFound` when it has no row
        for `root_id`.
        """
        self._table(ROOT_STATE, required=True)
        registered = self._query(
            ROOTS, _root_columns(preview_chars), [f"root_id = {int(root_id)}"], limit=1
        )
        root = registered[0] if registered else None
        ingested = _utc(root["ingested_at"]) if root else None
        events = self._events(root_id, ingested)
        span: tuple[date, date] | None = None
        if events:
            # first_event_date is the day of one of the root's events (in UTC).
            span = (events[0].event_time.date(), max(e.event_time for e in events).date())
        elif ingested is not None:
            span = ((ingested - CLOCK_SKEW).date(), (ingested + CLOCK_SKEW).date())
        state = self._states([root_id], span).get(root_id)
        if state is None:
            raise RootNotFound(self._not_found(root_id, root is not None, len(events)))
        origin = (root["origin_root_id"] if root else None) or state.origin_root_id or root_id
        source = _source(root, preview_chars) if root else None
        attempts = self._attempts(root_id, origin, ingested if origin == root_id else None, state)
        return Journey(state, source, events, origin, attempts)

    def _events(self, root_id: int, ingested: datetime | None) -> list[Event]:
        where = [f"root_id = {int(root_id)}"]
        if ingested is not None:
            where.append(f"event_time >= {_sql_ts(ingested - CLOCK_SKEW)}")
        rows = self._query(ACK_EVENTS, _EVENT_COLUMNS, where, order="event_time, event_id")
        seen: set[str] = set()
        events = []
        for row in rows:
            events.append(
                Event(
                    event_id=row["event_id"],
                    kind=row["kind"],
                    stage=row["stage"],
                    event_time=_utc(row["event_time"]),
                    ack_val=row["ack_val"],
                    reason=row["reason"],
                    duplicate=row["event_id"] in seen,
                )
            )
            seen.add(row["event_id"])
        return events

    def _states(
        self, root_ids: Sequence[int], span: tuple[date, date] | None
    ) -> dict[int, RootState]:
        """`root_state` rows of `root_ids`: in the `first_event_date` partitions of `span`
        first, then, for the ids not found there, in all partitions."""
        found: dict[int, RootState] = {}
        missing = list(dict.fromkeys(root_ids))
        for partitions in ([span] if span else []) + [None]:
            if not missing:
                break
            where = [f"root_id IN ({', '.join(str(int(i)) for i in missing)})"]
            if partitions is not None:
                low, high = partitions
                where.append(f"first_event_date BETWEEN {_sql_date(low)} AND {_sql_date(high)}")
            for row in self._query(ROOT_STATE, STATE_COLUMNS, where, required=True):
                found[row["root_id"]] = _state(row)
            missing = [root_id for root_id in missing if root_id not in found]
        return found

    def _attempts(
        self, root_id: int, origin: int, origin_ingested: datetime | None, state: RootState
    ) -> list[Attempt]:
        """The roots registered with `origin` as their first attempt, each with its status."""
        columns = ["root_id", "attempt", "ingested_at"]
        if origin_ingested is None:
            first = self._query(ROOTS, columns, [f"root_id = {int(origin)}"], limit=1)
            origin_ingested = _utc(first[0]["ingested_at"]) if first else None
        where = [f"origin_root_id = {int(origin)}"]
        if origin_ingested is not None:
            # Replays are registered after the first attempt: older files are skipped.
            where.append(f"ingested_at >= {_sql_ts(origin_ingested - CLOCK_SKEW)}")
        chain = {row["root_id"]: row for row in self._query(ROOTS, columns, where)}
        chain.setdefault(
            root_id, {"root_id": root_id, "attempt": state.attempt or 1, "ingested_at": None}
        )
        statuses = {root_id: state.status}
        others = [other for other in chain if other != root_id]
        if others:
            times = [_utc(chain[o]["ingested_at"]) for o in others if chain[o]["ingested_at"]]
            span = None
            if len(times) == len(others):
                span = ((min(times) - CLOCK_SKEW).date(), (max(times) + CLOCK_SKEW).date())
            for other_id, other in self._states(others, span).items():
                statuses[other_id] = other.status
        attempts = [
            Attempt(
                root_id=row["root_id"],
                attempt=row["attempt"],
                ingested_at=_utc(row["ingested_at"]) if row["ingested_at"] else None,
                status=statuses.get(row["root_id"]),
            )
            for row in chain.values()
        ]
        attempts.sort(key=lambda attempt: (attempt.attempt, attempt.root_id))
        return attempts

    def _not_found(self, root_id: int, registered: bool, events: int) -> str:
        message = f"no root {root_id} in {self.ledger.path(ROOT_STATE)}"
        if registered or events:
            seen = "it is registered in roots" if registered else f"{events} events in ack_events"
            message += f" ({seen} but not reconciled yet: run `ackfold reconcile`)"
        return message


def _root_columns(preview_chars: int) -> tuple[str, ...]:
    return (
        "root_id",
        "app",
        "attempt",
        "origin_root_id",
        "source",
        "source_queue",
        "source_message_id",
        "source_position",
        "ingested_at",
        # Never the whole payload: a capped preview and the length, cut inside the scan.
        f"substr(payload, 1, {int(preview_chars)}) AS payload_preview",
        "character_length(payload) AS payload_chars",
    )


_EVENT_COLUMNS: Final = ("event_id", "kind", "stage", "event_time", "ack_val", "reason")


def _source(root: dict[str, Any], preview_chars: int) -> Source:
    chars = root["payload_chars"]
    return Source(
        source=root["source"],
        source_queue=root["source_queue"],
        source_message_id=root["source_message_id"],
        source_position=root["source_position"],
        ingested_at=_utc(root["ingested_at"]),
        payload_preview=root["payload_preview"],
        payload_chars=chars or 0,
        payload_truncated=chars is not None and chars > preview_chars,
    )


# --- output ---------------------------------------------------------------------------


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


_ROOTS_HEADER: Final = (
    "ROOT_ID",
    "APP",
    "STATUS",
    "ATTEMPT",
    "LAST_STAGE",
    "EVENTS",
    "LAST_EVENT_AT",
    "FAIL_REASON",
)


def format_roots(page: RootPage) -> str:
    """`ackfold roots`: an aligned table, newest first (no trailing newline)."""
    rows = [_ROOTS_HEADER] + [
        (
            str(r.root_id),
            one_line(r.app, 24),
            one_line(r.status, 16),
            str(r.attempt) if r.attempt is not None else "-",
            one_line(r.last_stage, 20),
            str(r.event_count),
            iso(r.last_event_at),
            one_line(r.fail_reason, 48) if r.fail_reason else "",
        )
        for r in page.roots
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_ROOTS_HEADER))]
    # Right-align the numbers, left-align the rest; no padding after the last column.
    right = {0, 3, 5}
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def format_roots_json(page: RootPage) -> str:
    """`ackfold roots --json`: a JSON array, one root per line."""
    if not page.roots:
        return "[]"
    items = ",\n".join(json.dumps(r.to_json(), sort_keys=True) for r in page.roots)
    return f"[\n{items}\n]"


def format_journey(journey: Journey) -> str:
    """`ackfold show`: the root's state, its source, its events by stage, its attempts."""
    s = journey.state
    lines = [f"root {s.root_id} ({hex64(s.root_id)})"]

    def put(label: str, value: str) -> None:
        lines.append(f"  {label:<13} {value}")

    put("app", one_line(s.app))
    put("status", f"{one_line(s.status)} (since {iso(s.status_changed_at)})")
    if not s.init_seen:
        tree = "init not seen"
    elif s.xor_acc == 0:
        tree = "init seen, tree complete"
    else:
        tree = "init seen, tree incomplete"
    put("xor_acc", f"{hex64(s.xor_acc)} ({tree})")
    attempt = str(s.attempt) if s.attempt is not None else "-"
    put("attempt", f"{attempt} of origin {journey.origin_root_id}")
    put("events", f"{s.event_count} folded, {iso(s.first_event_at)} .. {iso(s.last_event_at)}")
    if journey.unreconciled:
        put("", f"{journey.unreconciled} more in ack_events, not reconciled yet")
    put("last stage", one_line(s.last_stage))
    if s.fail_reason is not None or s.fail_stage is not None:
        where = f" (stage {one_line(s.fail_stage)} at {iso(s.fail_at)})" if s.fail_stage else ""
        put("fail reason", one_line(s.fail_reason, PAYLOAD_PREVIEW) + where)
    else:
        put("fail reason", "-")
    src = journey.source
    if src is None:
        put("source", "- (no row in roots)")
    else:
        parts = [one_line(src.source)]
        if src.source_queue:
            parts.append(f"queue {one_line(src.source_queue)}")
        if src.source_message_id:
            parts.append(f"message {one_line(src.source_message_id)}")
        if src.source_position:
            parts.append(f"position {one_line(src.source_position)}")
        put("source", " ".join(parts))
        put("ingested at", iso(src.ingested_at))
        if src.payload_preview is None:
            put("payload", "-")
        elif src.payload_truncated:
            put(
                "payload",
                f"{one_line(src.payload_preview)}... "
                f"(truncated: first {PAYLOAD_PREVIEW} of {src.payload_chars} chars)",
            )
        else:
            put("payload", one_line(src.payload_preview))

    lines.append("")
    lines.append(f"events by stage ({len(journey.events)} in ack_events)")
    if not journey.events:
        lines.append("  (none)")
    for stage, events in journey.stages:
        lines.append(f"  {one_line(stage)}")
        for e in events:
            line = f"    {iso(e.event_time)}  {e.kind:<4}  {hex64(e.ack_val)}"
            if e.reason is not None:
                line += f"  reason: {one_line(e.reason, PAYLOAD_PREVIEW)}"
            if e.duplicate:
                line += "  (duplicate, not folded)"
            lines.append(line)

    lines.append("")
    lines.append(f"attempts (origin {journey.origin_root_id})")
    width = max(len(str(a.root_id)) for a in journey.attempts)
    for a in journey.attempts:
        mark = "*" if a.root_id == s.root_id else " "
        shown = a.status if a.status is not None else "(not reconciled)"
        lines.append(
            f"  {mark} #{a.attempt:<3} {a.root_id:>{width}}  {shown:<16}"
            f"  ingested {iso(a.ingested_at)}"
        )
    return "\n".join(lines)


def format_journey_json(journey: Journey) -> str:
    return json.dumps(journey.to_json(), indent=2, sort_keys=True)


# --- helpers --------------------------------------------------------------------------


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_ts(moment: datetime) -> str:
    return f"TIMESTAMP '{iso(moment, precise=True)}'"


def _sql_date(day: date) -> str:
    return f"DATE '{day.isoformat()}'"


def _utc(moment: datetime) -> datetime:
    """Delta timestamps are UTC instants; a naive one (timestamp_ntz) is read as UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _state(row: dict[str, Any]) -> RootState:
    values = {name: row[name] for name in STATE_COLUMNS}
    for name in ("first_event_at", "last_event_at", "status_changed_at", "fail_at"):
        if values[name] is not None:
            values[name] = _utc(values[name])
    return RootState(**values)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value, precise=True)
    if isinstance(value, date):
        return value.isoformat()
    return value


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
