"""The reconciler: Storm's acker, as an incremental batch fold over the Delta ledger.

Each run reads only the `ack_events` appended since the mark the last run left in
`root_state` (`ackfold.ledger.commits.marks`, shared with the embedded engine): the files the
table's log names after it, in slices of at most `reconcile.max_bytes_per_batch`. For
each slice it folds the new events per root (`spark_fold.fold_events`: one shuffle),
joins them with the state of the roots it keeps open and classifies every open root
again, events or not, so that a timeout fires without an event (`spark_fold.combine`);
then it MERGEs the rows that changed, appends the roots seen for the first time, keeps
the events of unknown roots waiting, and moves the mark. A run with no new event still
classifies the open roots.

Every commit carries the lease's epoch as its Delta transaction (`txnAppId`,
`txnVersion`: `ackfold.ledger.commits.fence`), so a run that lost the lease commits nothing.

The algorithm is `ackfold.reconcile.spark_fold`, which matches `ackfold.reconcile.fold`
(the plain Python reference) row for row; what is read of `root_state` and how it is
written back is `ackfold.reconcile.state`; this module is the run around them.

Example:
    >>> from ackfold.runs.reconcile import reconcile
    >>> summary = reconcile(spark, settings)          # doctest: +SKIP
    >>> summary["by_status"]                          # doctest: +SKIP
    {'completed': 1998, 'failed': 2}
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings
from ackfold.embedded.log import DataFile
from ackfold.ledger.commits.dml import with_txn
from ackfold.ledger.commits.fence import spark_commit
from ackfold.ledger.commits.lease import ledger_turn
from ackfold.ledger.commits.marks import check_app_name, commit_mark
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.contract import CLOCK_SKEW, arrow_schema
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ACK_EVENTS_COLUMNS,
    ROOT_STATE,
    ROOTS,
    UNMATCHED_EVENTS,
    Ledger,
    spark_schema,
)
from ackfold.ledger.setup.create import create_tables
from ackfold.ledger.setup.layout import upgrade_root_state
from ackfold.ledger.storage.store import is_object_store
from ackfold.reconcile import quiet
from ackfold.reconcile.new_events import byte_limit, new_events, oldest_in_log, slices
from ackfold.reconcile.spark_fold import (
    INSERT,
    PARK,
    UPDATE,
    combine,
    fold_events,
    fold_partitions,
)
from ackfold.reconcile.spark_reads import delta_frame, spark_uri
from ackfold.reconcile.state import (
    append_new,
    known_roots,
    merge_updates,
    open_state,
    settled_before,
    window_start,
)
from ackfold.reconcile.timeouts import explain_timeouts
from ackfold.spark.frames import local_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("ackfold.reconcile")

__all__ = ["Reconciler", "check_app_name", "reconcile_quietly"]


class Reconciler:
    """One reconcile run over a ledger: `run()` folds what is new and classifies the open
    roots, then returns the summary."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        *,
        now: datetime | None = None,
        app: str | None = None,
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.ledger = Ledger(settings.table_root)
        self.now = (now or datetime.now(UTC)).astimezone(UTC)
        self.app = check_app_name(app) if app is not None else None
        self.counts = dict.fromkeys(quiet.COUNTERS, 0)
        self.batches = 0

    # -- the run ----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        # An earlier layout first: the checks and writes below are for the current one.
        upgrade_root_state(self.ledger)
        # Made by delta-rs, as on an object store (where `create_tables` picks its own
        # writer): the same tables (tests/spark/test_ledger_create.py), without a DDL
        # statement on Spark, the run's first and coldest (seconds of a first run's JVM).
        tables = (ACK_EVENTS, ROOTS, ROOT_STATE, UNMATCHED_EVENTS)
        local = None if is_object_store(self.ledger.root) else LedgerWriter(self.ledger.root)
        create_tables(self.spark, self.ledger, tables, writer=local)
        appends, _ = new_events(self.ledger, self.app)
        limit = byte_limit(self.settings.reconcile.max_bytes_per_batch)
        for files, version in slices(appends, limit):
            self.batches += 1
            self.step(files)
            if version is not None:
                commit_mark(self.ledger, self.app, appends.table_id, version)
        if not self.batches:
            self.step(None)  # nothing new: the open roots are classified all the same
        # Roots that timed out at a stage whose outputs no stage acks say so (issue 42).
        explain_timeouts(self.spark, self.ledger, now=self.now, app=self.app)
        commit_mark(self.ledger, self.app, appends.table_id, appends.version)
        return self.summary()

    def _events_of(self, files: list[DataFile]) -> DataFrame:
        """The rows of `files` (data files of `ack_events`, which holds its rows as they
        are: `ackfold.embedded.log` checked its protocol), of this run's app."""
        from pyspark.sql import functions as F

        paths = [spark_uri(self.ledger, f.uri) for f in files]
        events = self.spark.read.schema(spark_schema(ACK_EVENTS)).parquet(*paths)
        return events if self.app is None else events.where(F.col("app") == F.lit(self.app))

    def step(self, files: list[DataFile] | None) -> None:
        """Fold the events of `files` (None: no new events) into root_state and classify the
        open roots.

        A batch run again (the run died between its writes and its mark) writes nothing it
        wrote before: the state it reads has its events already (each open root keeps the
        hashes of the events it folded, a settled root is known as such), so its rows come
        out unchanged."""
        from pyspark.sql import functions as F

        batch = None if files is None else self._events_of(files)
        first_event = None
        if batch is not None:  # after an outage, its events are older than `now`
            first_event = self._oldest_event(files or [], batch)
        since = window_start(self.settings, self.now, first_event)
        prior = open_state(self.spark, self.ledger, since=since, app=self.app)
        events = self._with_waiting(batch)
        partitions = self._partitions(files or [])
        new = fold_events(events, prior.select("root_id", "seen_event_hashes"), partitions)
        oldest = None
        # Nothing new: `new` is empty by construction, and Spark prunes what joins it; no
        # job to cache it or to find its oldest event, a few seconds of a quiet run.
        if batch is not None:
            new = new.cache()
        try:
            if batch is not None:
                oldest = new.agg(F.min("first_event_at")).first()[0]  # type: ignore[index]
            first_day = min(since, oldest.astimezone(UTC).date()) if oldest else since
            rows = combine(
                new,
                prior,
                known_roots(self.spark, self.ledger, since=first_day, app=self.app),
                self._registrations(first_day - CLOCK_SKEW),
                settings=self.settings,
                now=F.lit(self.now),
            ).cache()
            try:
                self._write(rows, events, first_day)
            finally:
                rows.unpersist()
        finally:
            new.unpersist()

    def _oldest_event(self, files: list[DataFile], batch: DataFrame) -> datetime | None:
        """The earliest event of a step's files: from the log's statistics when it keeps
        them for every file and the run folds every app, else a job over `batch`."""
        from pyspark.sql import functions as F

        oldest = oldest_in_log(self.ledger, files) if self.app is None else None
        if oldest is None:
            oldest = batch.agg(F.min("event_time")).first()[0]  # type: ignore[index]
        return oldest

    def _write(self, rows: DataFrame, events: DataFrame, first_day: date) -> None:
        from pyspark.sql import functions as F

        change = F.col("change")
        totals = _totals(rows)
        if PARK in totals and int(totals[PARK]["read"] or 0):
            rows = self._drop_copies_of_settled(rows, first_day)
            totals = _totals(rows)
        read = sum(int(r["read"] or 0) for r in totals.values())
        copies = sum(int(r["copies"] or 0) for r in totals.values())
        folded = sum(int(totals[c]["fresh"] or 0) for c in (UPDATE, INSERT) if c in totals)
        parked = int(totals[PARK]["copies"] or 0) if PARK in totals else 0
        self.counts["events_read"] += read
        self.counts["events_folded"] += folded
        self.counts["duplicates_dropped"] += copies - folded - parked
        log.info(
            "reconcile (app=%s): %d new events, %d waiting, %d folded, %d root(s) changed, "
            "%d new, %d waiting for their init",
            self.app or "*", read, copies - read, folded, _roots(totals, UPDATE),
            _roots(totals, INSERT), _roots(totals, PARK),
        )  # fmt: skip
        updates = rows.where(change == UPDATE)
        if UPDATE in totals:
            moved = updates.select("prior_date", "prior_status").distinct().collect()
            self.counts["roots_updated"] += merge_updates(
                self.ledger,
                updates,
                [(r["prior_date"], r["prior_status"]) for r in moved],
            )
        if INSERT in totals:
            append_new(self.ledger, rows.where(change == INSERT))
            self.counts["roots_updated"] += _roots(totals, INSERT)
        if PARK in totals or copies > read:
            self._park(
                events.join(rows.where(change == PARK).select("root_id"), "root_id", "left_semi")
            )

    def _drop_copies_of_settled(self, rows: DataFrame, first_day: date) -> DataFrame:
        """`rows`, less the roots it would park for the first time that have a settled row
        first seen before `first_day`: their events are copies (a run killed before its
        mark, an `--app` run that folded them), dropped as the embedded engine drops them
        (`ackfold.reconcile.state.settled_before`)."""
        from pyspark.sql import functions as F

        first_parked = rows.where((F.col("change") == PARK) & (F.col("read") > 0))
        parked = [int(r["root_id"]) for r in first_parked.select("root_id").collect()]
        found = settled_before(self.ledger, parked, first_day, self.app)
        if not found:
            return rows
        log.info("reconcile: %d root(s) settled before %s read again", len(found), first_day)
        settled = F.col("root_id").isin(sorted(found))
        return rows.withColumn("change", F.when(~settled, F.col("change")))

    # -- the inputs -------------------------------------------------------------------

    def _read(self, table: str) -> DataFrame:
        # From its data files: no Delta snapshot job (`ackfold.reconcile.spark_reads`).
        return delta_frame(self.spark, self.ledger, table)

    def _partitions(self, files: list[DataFile]) -> int:
        """Partitions of the one shuffle of the events: the session's shuffle partitions,
        or more for a large step, so that each task's aggregations fit in its memory."""
        configured = int(self.spark.conf.get("spark.sql.shuffle.partitions") or 4)
        return max(configured, fold_partitions(sum(f.size for f in files)))

    def _waiting_events(self) -> DataFrame:
        from pyspark.sql import functions as F

        waiting = self._read(UNMATCHED_EVENTS)
        return waiting if self.app is None else waiting.where(F.col("app") == self.app)

    def _with_waiting(self, batch: DataFrame | None) -> DataFrame:
        """The batch's events and the events still waiting for their root, flagged."""
        from pyspark.sql import functions as F

        if batch is None:  # no new events: the waiting ones are retried with the next
            empty = local_frame(self.spark, [], arrow_schema(ACK_EVENTS))
            return empty.withColumn("waiting", F.lit(False))
        names = ACK_EVENTS_COLUMNS
        return batch.select(*names, F.lit(False).alias("waiting")).unionByName(
            self._waiting_events().select(*names, F.lit(True).alias("waiting"))
        )

    def _registrations(self, since: date) -> DataFrame:
        """(root_id, attempt, origin_root_id) of the roots registered since `since`: the
        replay chain of the roots seen for the first time."""
        from pyspark.sql import functions as F

        start = datetime.combine(since, datetime.min.time(), tzinfo=UTC)
        return (
            self._read(ROOTS)
            .where(F.col("ingested_at") >= F.lit(start))
            .groupBy("root_id")
            .agg(F.min("attempt").alias("attempt"), F.min("origin_root_id").alias("origin_root_id"))
        )

    # -- the outputs ------------------------------------------------------------------

    def _park(self, waiting: DataFrame) -> None:
        """Keep the events of roots with no state and no init in unmatched_events, for the
        next run with new events; the other apps' waiting events stay as they are."""
        from pyspark.sql import functions as F

        others = self._read(UNMATCHED_EVENTS)
        others = others.where(F.col("app") != self.app) if self.app else others.limit(0)
        rows = others.unionByName(waiting.select(*others.columns).dropDuplicates())
        path = self.ledger.path(UNMATCHED_EVENTS)
        spark_commit(
            self.ledger.root,
            path,
            lambda txn: with_txn(rows.write.format("delta").mode("overwrite"), txn).save(path),
            what=f"overwrite of {path}",
        )

    def summary(self) -> dict[str, Any]:
        # Read without Spark, as the quiet path reads it: the log's counts per status
        # partition, no Delta snapshot job on the JVM (`ackfold.reconcile.quiet`).
        unmatched, by_status = quiet.counted(self.settings, self.app)
        return quiet.summary(self.app, self.now, self.counts, unmatched, by_status)


def _totals(rows: DataFrame) -> dict[str | None, Any]:
    """Per `change`: the roots, their fresh events, the copies read, the events read."""
    from pyspark.sql import functions as F

    return {
        r["change"]: r
        for r in rows.groupBy("change")
        .agg(
            F.count("*").alias("roots"),
            F.sum("fresh").alias("fresh"),
            F.sum(F.col("read") + F.col("waited")).alias("copies"),
            F.sum("read").alias("read"),
        )
        .collect()
    }


def _roots(totals: dict[str | None, Any], change: str) -> int:
    return int(totals[change]["roots"]) if change in totals else 0


def reconcile_quietly(
    settings: Settings, *, now: datetime | None = None, app: str | None = None
) -> dict[str, Any] | None:
    """The summary of a reconcile that has nothing to do (no event since the last run, no
    timeout due), found without Spark; None when `reconcile` must run
    (`ackfold.reconcile.quiet`). Call it before starting Spark, to start none.

    Example:
        >>> summary = reconcile_quietly(settings)            # doctest: +SKIP
        >>> summary = summary or reconcile(get_spark(settings), settings)  # doctest: +SKIP
    """
    at = (now or datetime.now(UTC)).astimezone(UTC)
    if app is not None:
        check_app_name(app)
    with ledger_turn(settings, _holder(app), say=log.info):
        return quiet.quiet_summary(settings, now=at, since=window_start(settings, at), app=app)


def _holder(app: str | None) -> str:
    return f"reconcile --app {app}" if app else "reconcile"
