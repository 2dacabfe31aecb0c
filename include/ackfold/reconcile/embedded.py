"""The reconcile on the embedded engine: DuckDB in this process, delta-rs for the tables.

The same run as `ackfold.reconcile.reconciler` (Spark), step for step, on the same
tables, and with the same result row for row (`tests/conformance`):

1. what is new: the `ack_events` appended since the mark the last run left in
   `root_state` (`ackfold.ledger.commits.marks`, shared by both engines), read from the
   table's log (`ackfold.embedded.log`);
2. in slices of at most `reconcile.max_bytes_per_batch` of parquet, each one a step:
   the slice's events and those waiting in `unmatched_events` folded per root
   (`duck_fold`), joined to the state of the open roots, every open root classified
   again; the changed rows MERGEd into `root_state` and the new ones appended, by
   delta-rs (`embedded_writes`); the events of roots still unknown kept waiting; then
   the mark moves on;
3. the summary, as the Spark run gives it.

Every commit carries the lease's epoch (`ackfold.ledger.commits.fence`): a run that lost the
lease while it was frozen commits nothing when it wakes up. A step run again (killed
between its writes and its mark) writes nothing twice: the state it reads has its events
already, as in the Spark run. Memory is bounded by the slice and by
`engine.memory_limit`, beyond which DuckDB spills to disk.

Example:
    >>> summary = EmbeddedReconciler(settings).run()      # doctest: +SKIP
    >>> summary["by_status"]                               # doctest: +SKIP
    {'completed': 1998, 'failed': 2}
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from ackfold.config import Settings
from ackfold.embedded import duck, tables
from ackfold.embedded.log import DataFile
from ackfold.ledger.commits.fence import commit
from ackfold.ledger.commits.marks import commit_mark
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.reading.sql import sql_date, sql_str
from ackfold.ledger.schema import status
from ackfold.ledger.schema.contract import CLOCK_SKEW
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ACK_EVENTS_COLUMNS,
    ROOT_STATE,
    ROOTS,
    UNMATCHED_EVENTS,
    Ledger,
)
from ackfold.ledger.setup.layout import upgrade_root_state
from ackfold.ledger.storage.run_store import Store
from ackfold.reconcile import duck_fold, quiet
from ackfold.reconcile.embedded_writes import StepWrites
from ackfold.reconcile.new_events import byte_limit, new_events, slices
from ackfold.reconcile.state import settled_before, window_start

log = logging.getLogger("ackfold.reconcile")

_EVENT_COLUMNS = ", ".join(ACK_EVENTS_COLUMNS)
# The step's events (of the apps `{mine}` accepts), flagged. A view, not a copy: the fold
# reads the files once, and the few lookups after it (events of the roots that stay open)
# read only the columns they need.
EVENTS_SQL = (  # built from ackfold's own column names only
    f"CREATE OR REPLACE TEMP VIEW events AS "  # noqa: S608
    f"SELECT {_EVENT_COLUMNS}, false AS waiting FROM new_input WHERE {{mine}} "
    f"UNION ALL SELECT {_EVENT_COLUMNS}, true AS waiting FROM waiting_input WHERE {{mine}}"
)


class EmbeddedReconciler:
    """One reconcile run on the embedded engine: `run()` folds what is new and classifies
    the open roots, then returns the summary."""

    def __init__(
        self,
        settings: Settings,
        *,
        now: datetime | None = None,
        app: str | None = None,
        store: Store | None = None,
    ) -> None:
        self.settings = settings
        self.ledger = Ledger(settings.table_root)
        # Every table through the ledger's writer: its URI as delta-rs spells it, and the
        # run's store (its options: credentials, endpoint; resolved once per run).
        self.writer = LedgerWriter(settings.table_root, store=store)
        self.options = self.writer.storage_options
        self.now = (now or datetime.now(UTC)).astimezone(UTC)
        self.app = app
        self.events_id = ""
        self.counts = dict.fromkeys(quiet.COUNTERS, 0)
        self.db = duck.connect(settings)
        self.writes = StepWrites(
            self.db, self.writer, app=app, counts=self.counts, commit=self._commit, scan=self.scan
        )
        self._register_policy()

    # -- the run ----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        # An earlier layout first: the checks and writes below are for the current one.
        upgrade_root_state(self.ledger)
        self.writer.create([ACK_EVENTS, ROOTS, ROOT_STATE, UNMATCHED_EVENTS])
        appends, _ = new_events(self.ledger, self.app)
        self.events_id = appends.table_id
        steps = 0
        limit = byte_limit(self.settings.reconcile.max_bytes_per_batch)
        for files, version in slices(appends, limit):
            self.step(files)
            steps += 1
            if version is not None:
                commit_mark(self.ledger, self.app, self.events_id, version)
        if not steps:
            self.step(None)  # nothing new: the open roots are classified all the same
        # Roots that timed out at a stage whose outputs no stage acks say so (issue 42).
        self._explain_timeouts()
        commit_mark(self.ledger, self.app, self.events_id, appends.version)
        return self.summary()

    def uri(self, table: str) -> str:
        return self.writer.uri(table)

    def scan(self, table: str, **how: Any) -> Any:
        """Ledger table `table` as a DuckDB relation (`ackfold.embedded.tables.scan`)."""
        return tables.scan(self.db, self.uri(table), storage_options=self.options, **how)

    def _commit(self, table: str, action: Callable[[Any, Any], Any], what: str) -> Any:
        """`action(delta_table, commit_properties)`: one commit to ledger table `table`,
        carrying the lease's epoch (`ackfold.ledger.commits.fence.commit`)."""
        return commit(
            self.settings.table_root,
            self.ledger.path(table),
            action,
            what=f"{what} {self.uri(table)}",
            load=lambda: self.writer.table(table),
        )

    def step(self, files: Sequence[DataFile] | None) -> None:
        """Fold the events of `files` (None: no new events) and the waiting ones into
        root_state, and classify the open roots again."""
        db = self.db
        self._register_events(files)
        (oldest_event,) = db.execute(
            "SELECT min(event_time) FROM events WHERE NOT waiting"
        ).fetchall()[0]
        since = window_start(self.settings, self.now, oldest_event)
        self._open_state(since)
        db.execute(
            "CREATE OR REPLACE TEMP TABLE prior_seen AS "
            "SELECT root_id, seen_event_hashes FROM prior"
        )
        db.execute(f"CREATE OR REPLACE TEMP TABLE seen AS {duck_fold.SEEN_SQL}")
        db.execute(f"CREATE OR REPLACE TEMP TABLE marked AS {duck_fold.FOLD_SQL}")
        (seen,) = db.execute("SELECT count(*) FROM seen").fetchall()[0]
        new = duck_fold.NEW_SQL if seen else duck_fold.NEW_SQL_ALL_FRESH
        db.execute(f"CREATE OR REPLACE TEMP TABLE new AS {new}")
        oldest = db.execute("SELECT min(first_event_at) FROM new").fetchall()[0][0]
        first_day = min(since, oldest.astimezone(UTC).date()) if oldest else since
        self._register_settled(first_day)
        self._register_registrations(first_day - CLOCK_SKEW)
        db.execute(
            f"CREATE OR REPLACE TEMP TABLE rows AS {duck_fold.COMBINE_SQL}",
            {"now": self.now},
        )
        self._drop_copies_of_settled(first_day)
        self._write()

    def _drop_copies_of_settled(self, first_day: date) -> None:
        """The roots this step would park for the first time that have a settled row first
        seen before `first_day` (out of the step's reads): their events are copies (a run
        killed before its mark, an `--app` run that folded them), dropped as Spark drops
        them (`ackfold.reconcile.state.settled_before`)."""
        parked = [
            int(root)
            for (root,) in self.db.execute(
                "SELECT root_id FROM rows WHERE change = $park AND read > 0",
                {"park": duck_fold.PARK},
            ).fetchall()
        ]
        found = settled_before(self.ledger, parked, first_day, self.app)
        if found:
            self.db.execute(
                "UPDATE rows SET change = NULL WHERE list_contains($found, root_id)",
                {"found": sorted(found)},
            )
            log.info("reconcile: %d root(s) settled before %s read again", len(found), first_day)

    # -- the inputs -------------------------------------------------------------------

    def _register_policy(self) -> None:
        """`policy`: each configured app's timeout and idle timeout in microseconds, and
        the defaults (app NULL). Rows inserted as parameters: building them in Arrow from
        Python lists would import pandas, a second of a short command's start."""

        def micros(value: timedelta | None) -> int | None:
            return None if value is None else value // timedelta(microseconds=1)

        self.db.execute("CREATE TEMP TABLE policy (app VARCHAR, timeout_us BIGINT, idle_us BIGINT)")
        rows = [(None, self.settings.defaults)] + [
            (a, self.settings.app(a)) for a in self.settings.apps
        ]
        self.db.executemany(
            "INSERT INTO policy VALUES ($1, $2, $3)",
            [[name, micros(p.timeout), micros(p.idle_timeout)] for name, p in rows],
        )

    def _open_state(self, since: date) -> None:
        """`prior`: the state of the roots kept open, unsettled anywhere in time and
        superseded ones first seen since `since` (`ackfold.reconcile.state.open_state`)."""
        day = since.isoformat()

        def open_partition(values: Mapping[str, str | None]) -> bool:
            kept = values["status"]
            return kept in status.UNSETTLED or (
                kept in status.SUPERSEDED and (values["first_event_date"] or "") >= day
            )

        self._scan_state(open_partition).create_view("prior_input", replace=True)
        self.db.execute(
            "CREATE OR REPLACE TEMP TABLE prior AS SELECT * FROM prior_input "
            "WHERE $app IS NULL OR app = $app",
            {"app": self.app},
        )

    def _scan_state(
        self, keep: Callable[[Mapping[str, str | None]], bool], columns: list[str] | None = None
    ) -> Any:
        return self.scan(ROOT_STATE, keep=keep, columns=columns)

    def _register_settled(self, since: date) -> None:
        """`settled`: the ids of the roots first seen since `since` that are not
        unsettled, among those this step names: their events are of roots with a final
        state (`ackfold.reconcile.state.known_roots`)."""
        day = since.isoformat()

        def settled_partition(values: Mapping[str, str | None]) -> bool:
            return (values["first_event_date"] or "") >= day and (
                values["status"] not in status.UNSETTLED
            )

        self._scan_state(settled_partition, ["root_id", "app"]).create_view(
            "settled_input", replace=True
        )
        self.db.execute(
            "CREATE OR REPLACE TEMP TABLE settled AS SELECT s.root_id FROM settled_input s "
            "SEMI JOIN new n ON n.root_id = s.root_id WHERE $app IS NULL OR s.app = $app",
            {"app": self.app},
        )

    def _register_registrations(self, since: date) -> None:
        """`registered`: (root_id, attempt, origin_root_id) of the roots registered since
        `since` that this step names: the replay chain of the roots seen the first time."""
        start = datetime.combine(since, datetime.min.time(), tzinfo=UTC)
        self.scan(ROOTS).create_view("roots_input", replace=True)
        self.db.execute(
            "CREATE OR REPLACE TEMP TABLE registered AS "
            "SELECT r.root_id, min(r.attempt) AS attempt, min(r.origin_root_id) AS origin_root_id "
            "FROM roots_input r SEMI JOIN new n ON n.root_id = r.root_id "
            "WHERE r.ingested_at >= $start GROUP BY r.root_id",
            {"start": start},
        )

    def _register_events(self, files: Sequence[DataFile] | None) -> None:
        """`events`: the step's new events and the waiting ones, flagged (`waiting`). With
        no new events the waiting ones wait for the next run that has some, as in Spark."""
        schema = tables.arrow_table_schema(self.writer.table(ACK_EVENTS))
        new = tables.scan_files(self.db, list(files or ()), schema, storage_options=self.options)
        new.create_view("new_input")
        waiting = self.scan(UNMATCHED_EVENTS)
        if files is None:
            waiting = waiting.limit(0)
        waiting.create_view("waiting_input")
        # A view takes no parameters: the app is a checked name (`check_app_name`), quoted.
        mine = "true" if self.app is None else f"app = {sql_str(self.app)}"
        self.db.execute(EVENTS_SQL.format(mine=mine))

    def _write(self) -> None:
        # The step's writes, named as the Spark engine names its own (`Reconciler._write`).
        self.writes.write()

    def _explain_timeouts(self) -> None:
        """`fail_reason` of the roots this run timed out at a stage whose outputs no stage
        has ever acked, as the Spark engine writes it (`ackfold.reconcile.timeouts`)."""
        from ackfold.reconcile.timeouts import app_histories

        self.scan(ROOT_STATE, keep=lambda v: v["status"] == status.TIMED_OUT).create_view(
            "timed_input", replace=True
        )
        timed = self.db.execute(
            "SELECT root_id, app, last_stage, first_event_date FROM timed_input "
            "WHERE status_changed_at = $now AND fail_at IS NULL AND fail_reason IS NULL "
            "AND ($app IS NULL OR app = $app)",
            {"now": self.now, "app": self.app},
        ).fetchall()
        if not timed:
            return
        apps = sorted({r[1] for r in timed})
        histories = {h.app: h for h in app_histories(self.ledger, apps, self.now)}
        reasons = [
            [root, day, reason]
            for root, app, stage, day in timed
            if app in histories and (reason := histories[app].timeout_reason(stage))
        ]
        if not reasons:
            return
        self.db.execute(
            "CREATE OR REPLACE TEMP TABLE reasons "
            "(root_id BIGINT, first_event_date DATE, reason VARCHAR)"
        )
        self.db.executemany("INSERT INTO reasons VALUES (?, ?, ?)", reasons)
        source = self.db.sql("SELECT * FROM reasons").to_arrow_table()
        days = ", ".join(sql_date(d) for d in sorted({r[1] for r in reasons}))
        predicate = (
            f"t.first_event_date IN ({days}) AND t.status = {sql_str(status.TIMED_OUT)} "
            "AND t.first_event_date = s.first_event_date AND t.root_id = s.root_id "
            "AND t.fail_at IS NULL"
        )
        self._commit(
            ROOT_STATE,
            lambda table, properties: (
                table.merge(
                    source, predicate, source_alias="s", target_alias="t",
                    commit_properties=properties,
                )
                .when_matched_update({"fail_reason": "s.reason"})
                .execute()
            ),
            "MERGE into",
        )  # fmt: skip
        log.info("reconcile: %d timed-out root(s) waited on a stage no stage acks", len(reasons))

    def summary(self) -> dict[str, Any]:
        unmatched, by_status = quiet.counted(self.settings, self.app)
        return quiet.summary(self.app, self.now, self.counts, unmatched, by_status)
