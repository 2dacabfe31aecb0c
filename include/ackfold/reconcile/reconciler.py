"""The reconciler: Storm's acker, as an incremental batch fold over the Delta ledger.

Each run reads only the `ack_events` appended since the last run (a Delta streaming read
with `availableNow` and a checkpoint). For each micro-batch it folds the new events per
root (`spark_fold.fold_events`: one shuffle), joins them with the state of the roots it
keeps open and classifies every open root again, events or not, so that a timeout fires
without an event (`spark_fold.combine`); then it MERGEs the rows that changed, appends
the roots seen for the first time, and keeps the events of unknown roots waiting. A run
with no new event still classifies the open roots.

The algorithm is `ackfold.reconcile.spark_fold`, which matches `ackfold.reconcile.fold`
(the plain Python reference) row for row; what is read of `root_state` and how it is
written back is `ackfold.reconcile.state`; this module is the run around them.

Example:
    >>> from ackfold.reconcile.reconciler import reconcile
    >>> summary = reconcile(spark, settings)          # doctest: +SKIP
    >>> summary["by_status"]                          # doctest: +SKIP
    {'completed': 1998, 'failed': 2}
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings
from ackfold.config.values import APP_NAME
from ackfold.ledger.conflicts import retry_conflicts
from ackfold.ledger.contract import CLOCK_SKEW
from ackfold.ledger.create import create_tables
from ackfold.ledger.layout import upgrade_root_state
from ackfold.ledger.lease import ledger_turn
from ackfold.ledger.tables import (
    ACK_EVENTS,
    ACK_EVENTS_COLUMNS,
    ROOT_STATE,
    ROOTS,
    UNMATCHED_EVENTS,
    Ledger,
    local_dir,
    spark_schema,
)
from ackfold.reconcile import quiet
from ackfold.reconcile.spark_fold import INSERT, PARK, UPDATE, combine, fold_events
from ackfold.reconcile.state import append_new, known_roots, merge_updates, open_state
from ackfold.reconcile.timeouts import explain_timeouts
from ackfold.spark import is_connect, start_query

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("ackfold.reconcile")

CHECKPOINTS = "_checkpoints"


def check_app_name(app: str) -> str:
    """`app`, if it is a plain name: it becomes part of a checkpoint path."""
    if not APP_NAME.match(app):
        raise ValueError(f"app {app!r} is not an app name: use letters, digits, '.', '_', '-'")
    return app


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
        self.scope = _scope(app)
        self.checkpoint = reconcile_checkpoint(self.ledger, app)
        self.query_name = f"ackfold-reconcile-{self.scope}"
        self.batches = 0
        # Under Spark Connect the batches run on a copy of this object, in the server's
        # Python worker, which shares this session: it hands its counts back in the
        # session's settings, under a key of this run's own.
        self.handback = f"ackfold.reconcile.run.{uuid.uuid4().hex}"

    def __getstate__(self) -> dict[str, Any]:
        # A copy on a Connect server works on its batch's session, not on the client's.
        state = self.__dict__.copy()
        state.pop("spark", None)
        return state

    # -- the run ----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        create_tables(self.spark, self.ledger, (ACK_EVENTS, ROOTS, ROOT_STATE, UNMATCHED_EVENTS))
        upgrade_root_state(self.spark, self.ledger)
        events = (
            self.spark.readStream.format("delta")
            .option("maxBytesPerTrigger", self.settings.reconcile.max_bytes_per_batch)
            # Maintenance deletes the events of long-completed roots: a commit that removes
            # rows is no new event, and must not stop the stream.
            .option("skipChangeCommits", "true")
        )
        read = self._version_to_read()
        start = self._starting_version()
        if start is not None:
            events = events.option("startingVersion", start)
        stream = events.load(self.ledger.path(ACK_EVENTS))
        if self.app:
            stream = stream.where(stream.app == self.app)
        writer = (
            stream.writeStream.foreachBatch(self._batch)
            .option("checkpointLocation", self.checkpoint)
            .trigger(availableNow=True)
            .queryName(self.query_name)
        )
        query = start_query(writer)
        query.awaitTermination()
        if is_connect(self.spark):
            self._take_back()
        if not self.batches:
            self.step(None)  # nothing new: the open roots are classified all the same
        # Roots that timed out at a stage whose outputs no stage acks say so (issue 42).
        explain_timeouts(self.spark, self.ledger, now=self.now, app=self.app)
        if read is not None:
            quiet.save_mark(self.checkpoint, read)
        return self.summary()

    def _version_to_read(self) -> tuple[str, int] | None:
        """(id, version) of `ack_events` as delta-rs reads it here, before the stream
        starts: what this run will have folded, for `quiet.save_mark`. None where this
        process does not see the table that Spark reads (a Connect server elsewhere)."""
        path = self.ledger.path(ACK_EVENTS)
        read = quiet.table_version(path)
        if read is not None and is_connect(self.spark):
            detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
            if detail is None or detail["id"] != read[0]:
                return None
        return read

    def _starting_version(self) -> int | None:
        """Where the stream starts when the embedded engine folded last: its checkpoint
        holds the mark of what was folded and no stream state of Spark's (the embedded
        engine retires it, `ackfold.reconcile.embedded`), so the stream starts after the
        mark instead of from the first version. None: the checkpoint decides."""
        directory = local_dir(self.checkpoint)
        if directory is None or (directory / "offsets").exists():
            return None
        mark = quiet.read_mark(self.checkpoint)
        read = quiet.table_version(self.ledger.path(ACK_EVENTS))
        if mark is None or read is None or mark[0] != read[0]:
            return None
        return mark[1] + 1

    def _batch(self, batch: DataFrame, batch_id: int) -> None:
        copy = "spark" not in self.__dict__  # this object, pickled to a Connect server
        if copy:
            self.spark = batch.sparkSession
        self.batches += 1
        self.step(batch)
        if copy:
            handed = {"batches": self.batches, **self.counts}
            self.spark.conf.set(self.handback, json.dumps(handed))

    def _take_back(self) -> None:
        """The counts of the batches a Connect server ran for this run."""
        handed = self.spark.conf.get(self.handback, None)
        if handed:
            self.spark.conf.unset(self.handback)
            counts = json.loads(handed)
            self.batches = int(counts.pop("batches"))
            self.counts.update({k: int(v) for k, v in counts.items()})

    def step(self, batch: DataFrame | None) -> None:
        """Fold `batch` (None: no new events) into root_state and classify the open roots.

        A batch run again (the run died between its writes and its checkpoint) writes
        nothing it wrote before: the state it reads has its events already (each open root
        keeps the hashes of the events it folded, a settled root is known as such), so its
        rows come out unchanged. That is why these writes need no Delta transaction ids,
        whose look-up costs a Spark job per table on every batch."""
        from pyspark.sql import functions as F

        since = _window_start(self.settings, self.now)
        prior = open_state(self.spark, self.ledger, since=since, app=self.app)
        events = self._with_waiting(batch)
        new = fold_events(events, prior.select("root_id", "seen_event_hashes"), self._partitions())
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
                self._write(rows, events)
            finally:
                rows.unpersist()
        finally:
            new.unpersist()

    def _write(self, rows: DataFrame, events: DataFrame) -> None:
        from pyspark.sql import functions as F

        change = F.col("change")
        totals = {
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

    # -- the inputs -------------------------------------------------------------------

    def _read(self, table: str) -> DataFrame:
        return self.spark.read.format("delta").load(self.ledger.path(table))

    def _partitions(self) -> int:
        """Partitions of the one shuffle of the events."""
        return int(self.spark.conf.get("spark.sql.shuffle.partitions") or 4)

    def _waiting_events(self) -> DataFrame:
        from pyspark.sql import functions as F

        waiting = self._read(UNMATCHED_EVENTS)
        return waiting if self.app is None else waiting.where(F.col("app") == self.app)

    def _with_waiting(self, batch: DataFrame | None) -> DataFrame:
        """The batch's events and the events still waiting for their root, flagged."""
        from pyspark.sql import functions as F

        if batch is None:  # no new events: the waiting ones are retried with the next
            empty = self.spark.createDataFrame([], spark_schema(ACK_EVENTS))
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
        writer = (
            others.unionByName(waiting.select(*others.columns).dropDuplicates())
            .write.format("delta")
            .mode("overwrite")
        )
        path = self.ledger.path(UNMATCHED_EVENTS)
        retry_conflicts(lambda: writer.save(path), what=f"overwrite of {path}")

    def summary(self) -> dict[str, Any]:
        from pyspark.sql import functions as F

        state = self._read(ROOT_STATE)
        if self.app:
            state = state.where(F.col("app") == self.app)
        # `status` is a partition column: this reads file metadata, not rows.
        by_status = {
            r["status"]: r["n"]
            for r in state.groupBy("status").agg(F.count("*").alias("n")).collect()
        }
        unmatched = self._waiting_events().count()
        return quiet.summary(self.app, self.now, self.counts, unmatched, by_status)


def _scope(app: str | None) -> str:
    return f"app={app}" if app else "all"


def reconcile_checkpoint(ledger: Ledger, app: str | None) -> str:
    """The checkpoint of the stream of new events of `app` (None: of every app)."""
    return ledger.path(f"{CHECKPOINTS}/reconcile/{_scope(app)}")


def _window_start(settings: Settings, now: datetime) -> date:
    """The first day of the window: superseded roots first seen since are kept open,
    and the ids of every other root first seen since tell its events from new ones."""
    return (now - settings.reconcile.lookback).date()


def _roots(totals: dict[str | None, Any], change: str) -> int:
    return int(totals[change]["roots"]) if change in totals else 0


def reconcile(
    spark: SparkSession,
    settings: Settings,
    *,
    now: datetime | None = None,
    app: str | None = None,
) -> dict[str, Any]:
    """Fold the events new since the last run into root_state with `spark`, and return a
    summary: `ackfold.reconcile.run.run_reconcile` on the Spark engine, which holds the
    ledger's turn, skips Spark when nothing is new and no timeout is due, and pushes the
    run's metrics."""
    from ackfold.embedded import SPARK
    from ackfold.reconcile.run import run_reconcile

    return run_reconcile(settings, now=now, app=app, spark=spark, engine=SPARK)


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
        return quiet.quiet_summary(
            settings,
            checkpoint=reconcile_checkpoint(Ledger(settings.table_root), app),
            now=at,
            since=_window_start(settings, at),
            app=app,
        )


def _holder(app: str | None) -> str:
    return f"reconcile --app {app}" if app else "reconcile"
