"""Read the ledger without a JVM: what `ackfold roots` and `ackfold show` print, and what
the Reliability UI builds on (`ackfold.ui.queries`).

Each query (`ackfold.ledger.reading.sql`) names its columns (never `seen_event_hashes`; of
`payload` only a capped preview, cut inside the scan) and filters that delta-rs pushes
down:

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

Inputs are checked before any table is opened (`ackfold.ledger.reading.parse`): `QueryError`
means the user asked something malformed (exit 2), `LedgerError` that the ledger cannot
answer (exit 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any, Final

from ackfold.ledger.errors import NoLedger, RootNotFound, UnknownApp
from ackfold.ledger.reading.parse import RootQuery
from ackfold.ledger.reading.pending import app_stages, explain_pending
from ackfold.ledger.reading.rows import (
    STATE_COLUMNS,
    Attempt,
    Event,
    Journey,
    PendingExplanation,
    RootPage,
    RootState,
    Source,
    state_from_row,
)
from ackfold.ledger.reading.sql import SqlReader, sql_date, sql_str, sql_ts
from ackfold.ledger.schema.contract import CLOCK_SKEW
from ackfold.ledger.schema.ids import format_id
from ackfold.ledger.schema.operational import QUALITY_RESULTS_DDL
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ROOT_STATE,
    ROOTS,
    column_specs,
)
from ackfold.ledger.schema.values import one_line, utc

PAYLOAD_PREVIEW: Final = 200
# Each retry of the top-N threshold covers this many times more rows than the last.
_WIDEN: Final = 8


class LedgerReader(SqlReader):
    """The ledger's read models under `warehouse` (`Settings.table_root`): roots listed
    newest first, one root's journey, the apps, a quality run. `scans` records every query,
    and `explain(scan)` shows what it read.
    """

    # roots

    def list_roots(self, query: RootQuery) -> RootPage:
        """The newest roots (by `last_event_at`) that match `query`, at most `query.limit`.

        Raises `NoLedger` when `root_state` is missing or empty, `UnknownApp` when the app
        has no root at all.
        """
        want = query.limit + 1  # one more tells whether there are more
        where = []
        if query.statuses:
            where.append(f"status IN ({', '.join(sql_str(s) for s in query.statuses)})")
        if query.app is not None:
            where.append(f"app = {sql_str(query.app)}")
        if query.since is not None:
            where.append(f"last_event_at >= {sql_ts(query.since)}")
        rows = self.newest(STATE_COLUMNS, where, want, since=query.since)
        if not rows:
            self._explain_empty(query)
        return RootPage(
            [state_from_row(row) for row in rows[: query.limit]], len(rows) > query.limit, query
        )

    def newest(
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
            extra = [f"last_event_at >= {sql_ts(bound)}"] if bound is not None else []
            rows = self.query(
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
        table = self.table(ROOT_STATE, required=True)
        with self.reading(ROOT_STATE):
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
                bounds.append(utc(low))
                target *= _WIDEN
        bounds.append(None)
        return bounds

    def _explain_empty(self, query: RootQuery) -> None:
        """Nothing matched: say why if the ledger is empty or the app unknown."""
        if not self.query(ROOT_STATE, ["root_id"], limit=1, required=True):
            raise NoLedger(
                f"no ledger at {self.warehouse}: {self.ledger.path(ROOT_STATE)} holds no roots "
                "yet; run `ackfold reconcile` after an app has written events"
            )
        if query.app is not None and not self.query(
            ROOT_STATE, ["app"], [f"app = {sql_str(query.app)}"], limit=1
        ):
            known = ", ".join(one_line(app, 40) for app in self.known_apps())
            raise UnknownApp(f"no root of app {one_line(query.app, 40)}; known apps: {known}")

    def app_has_events(self, app: str) -> bool:
        """Whether `ack_events` holds any event of `app` (NoLedger when it does not exist)."""
        rows = self.query(ACK_EVENTS, ["app"], [f"app = {sql_str(app)}"], limit=1, required=True)
        return bool(rows)

    def missing_roots(self, root_ids: Sequence[int]) -> list[int]:
        """The ids among `root_ids` that `root_state` has no row for (NoLedger if none)."""
        wanted = sorted({int(r) for r in root_ids})
        if not wanted:
            return []
        where = [f"root_id IN ({', '.join(str(r) for r in wanted)})"]
        found = {
            row["root_id"] for row in self.query(ROOT_STATE, ["root_id"], where, required=True)
        }
        return [r for r in wanted if r not in found]

    def known_apps(self) -> list[str]:
        """The apps that have roots in `root_state` (reads the `app` column only)."""
        rows = self.query(ROOT_STATE, ["DISTINCT app"], order="app", required=True)
        return [str(row["app"]) for row in rows]

    # one root

    def quality_run(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The `quality_results` rows of run `run_id`, or of the latest run; none if there
        is no such run (or no quality run yet)."""
        from ackfold.ledger.schema.tables import QUALITY_RESULTS

        if run_id is None:
            latest = self.query(QUALITY_RESULTS, ["run_id"], order="run_at DESC", limit=1)
            if not latest:
                return []
            run_id = latest[0]["run_id"]
        columns = [name for name, _, _ in column_specs(QUALITY_RESULTS_DDL)]
        return self.query(
            QUALITY_RESULTS,
            columns,
            [f"run_id = {sql_str(str(run_id))}"],
            order="suite, check_name",
        )

    def show_root(
        self,
        root_id: int,
        *,
        preview_chars: int = PAYLOAD_PREVIEW,
        now: datetime | None = None,
    ) -> Journey:
        """The journey of one root: its state, its events, where it came from, its attempts,
        and, if it has not completed, what it waits for (as of `now`). Of the payload, only
        its first `preview_chars` characters are read.

        Raises `NoLedger` when `root_state` is missing, `RootNotFound` when it has no row
        for `root_id`.
        """
        self.table(ROOT_STATE, required=True)
        registered = self.query(
            ROOTS, _root_columns(preview_chars), [f"root_id = {int(root_id)}"], limit=1
        )
        root = registered[0] if registered else None
        ingested = utc(root["ingested_at"]) if root else None
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
        return Journey(state, source, events, origin, attempts, self._why(state, events, now))

    def _why(
        self, state: RootState, events: list[Event], now: datetime | None
    ) -> PendingExplanation | None:
        """What a root that waits for events waits for (two more reads: what the app's
        completed roots went through); None for a settled root."""
        at = now or datetime.now(UTC)
        if explain_pending(state, events, None, at) is None:
            return None
        return explain_pending(state, events, app_stages(self, state.app, now=at), at)

    def _events(self, root_id: int, ingested: datetime | None) -> list[Event]:
        where = [f"root_id = {int(root_id)}"]
        if ingested is not None:
            where.append(f"event_time >= {sql_ts(ingested - CLOCK_SKEW)}")
        rows = self.query(ACK_EVENTS, _EVENT_COLUMNS, where, order="event_time, event_id")
        seen: set[str] = set()
        events = []
        for row in rows:
            events.append(
                Event(
                    event_id=row["event_id"],
                    kind=row["kind"],
                    stage=row["stage"],
                    event_time=utc(row["event_time"]),
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
                where.append(f"first_event_date BETWEEN {sql_date(low)} AND {sql_date(high)}")
            for row in self.query(ROOT_STATE, STATE_COLUMNS, where, required=True):
                found[row["root_id"]] = state_from_row(row)
            missing = [root_id for root_id in missing if root_id not in found]
        return found

    def _attempts(
        self, root_id: int, origin: int, origin_ingested: datetime | None, state: RootState
    ) -> list[Attempt]:
        """The roots registered with `origin` as their first attempt, each with its status."""
        columns = ["root_id", "attempt", "ingested_at"]
        if origin_ingested is None:
            first = self.query(ROOTS, columns, [f"root_id = {int(origin)}"], limit=1)
            origin_ingested = utc(first[0]["ingested_at"]) if first else None
        where = [f"origin_root_id = {int(origin)}"]
        if origin_ingested is not None:
            # Replays are registered after the first attempt: older files are skipped.
            where.append(f"ingested_at >= {sql_ts(origin_ingested - CLOCK_SKEW)}")
        chain = {row["root_id"]: row for row in self.query(ROOTS, columns, where)}
        chain.setdefault(
            root_id, {"root_id": root_id, "attempt": state.attempt or 1, "ingested_at": None}
        )
        statuses = {root_id: state.status}
        others = [other for other in chain if other != root_id]
        if others:
            times = [utc(chain[o]["ingested_at"]) for o in others if chain[o]["ingested_at"]]
            span = None
            if len(times) == len(others):
                span = ((min(times) - CLOCK_SKEW).date(), (max(times) + CLOCK_SKEW).date())
            for other_id, other in self._states(others, span).items():
                statuses[other_id] = other.status
        attempts = [
            Attempt(
                root_id=row["root_id"],
                attempt=row["attempt"],
                ingested_at=utc(row["ingested_at"]) if row["ingested_at"] else None,
                status=statuses.get(row["root_id"]),
            )
            for row in chain.values()
        ]
        attempts.sort(key=lambda attempt: (attempt.attempt, attempt.root_id))
        return attempts

    def _not_found(self, root_id: int, registered: bool, events: int) -> str:
        message = f"no root {format_id(root_id)} in {self.ledger.path(ROOT_STATE)}"
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
        ingested_at=utc(root["ingested_at"]),
        payload_preview=root["payload_preview"],
        payload_chars=chars or 0,
        payload_truncated=chars is not None and chars > preview_chars,
    )
