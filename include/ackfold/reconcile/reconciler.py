"""The reconciler: Storm's acker, as an incremental batch fold over the Delta ledger.

Each run reads only the `ack_events` appended since the last run (a Delta streaming read
with `availableNow` and a checkpoint), drops duplicate events, XOR-folds them per root
into `root_state` with one MERGE per micro-batch, and finally re-classifies the roots
still in flight, so that timeouts fire even when no event arrives.

The algorithm is `ackfold.reconcile.spark_fold` (`fold_events`, `classify`, `combine`),
which matches `ackfold.reconcile.fold` (the plain Python reference) row for row; this
module is the plumbing around it.

Example:
    >>> from ackfold.reconcile.reconciler import reconcile
    >>> summary = reconcile(spark, settings)          # doctest: +SKIP
    >>> summary["by_status"]                          # doctest: +SKIP
    {'completed': 1998, 'failed': 2}
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings
from ackfold.ledger import status
from ackfold.ledger.lock import ledger_lock
from ackfold.ledger.tables import ACK_EVENTS, ROOT_STATE, ROOTS, UNMATCHED_EVENTS, Ledger
from ackfold.reconcile.spark_fold import classify, combine, fold_events, policy_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("ackfold.reconcile")

CHECKPOINTS = "_checkpoints"
_APP_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")
TXN_APP = "ackfold-reconcile"


def check_app_name(app: str) -> str:
    """`app`, if it is a plain name: it becomes part of a checkpoint path."""
    if not _APP_NAME.match(app):
        raise ValueError(f"app {app!r} is not an app name: use letters, digits, '.', '_', '-'")
    return app


class Reconciler:
    """One reconcile run over a ledger: `run()` folds what is new, then sweeps timeouts."""

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
        self.counts = {"events_read": 0, "duplicates_dropped": 0, "roots_updated": 0}
        self.scope = f"app={app}" if app else "all"
        self.checkpoint = self.ledger.path(f"{CHECKPOINTS}/reconcile/{self.scope}")
        self.query_name = f"ackfold-reconcile-{self.scope}"

    # -- the run ----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        self.ledger.create(self.spark)
        events = (
            self.spark.readStream.format("delta")
            .option("maxBytesPerTrigger", self.settings.reconcile.max_bytes_per_batch)
            # Maintenance deletes the events of long-completed roots: a commit that removes
            # rows is no new event, and must not stop the stream.
            .option("skipChangeCommits", "true")
        )
        stream = events.load(self.ledger.path(ACK_EVENTS))
        if self.app:
            stream = stream.where(stream.app == self.app)
        query = (
            stream.writeStream.foreachBatch(self._batch)
            .option("checkpointLocation", self.checkpoint)
            .trigger(availableNow=True)
            .queryName(self.query_name)
            .start()
        )
        query.awaitTermination()
        self._sweep()
        return self.summary()

    def _batch(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        parked = self._read(UNMATCHED_EVENTS)
        if self.app:
            parked = parked.where(F.col("app") == self.app)
        read, waiting = batch.count(), parked.count()
        if read + waiting == 0:
            return
        since = self._window_start()
        state = self._state(since)
        # One shuffle by root: the de-duplication, the fold and the joins all reuse it.
        events = (
            batch.unionByName(parked).repartition("root_id").dropDuplicates(["root_id", "event_id"])
        )
        new = fold_events(events)
        roots = self._read(ROOTS)
        folded = combine(new, state, roots, since, settings=self.settings, now=F.lit(self.now))
        folded = folded.cache()
        try:
            totals = folded.agg(
                F.sum("new_events").alias("folded"),
                F.count_if(~F.col("known")).alias("unknown"),
            ).first()
            assert totals is not None
            log.info(
                "reconcile batch %d (app=%s): %d new events, %d waiting, %d folded",
                batch_id, self.app or "*", read, waiting, int(totals["folded"] or 0),
            )  # fmt: skip
            self.counts["events_read"] += read
            self.counts["duplicates_dropped"] += read + waiting - int(totals["folded"] or 0)
            txn = (f"{TXN_APP}/{self._query_id()}", batch_id)
            self._merge(folded.where(F.col("known")), since, txn)
            if waiting or totals["unknown"]:
                self._park(folded.where(~F.col("known")), events, txn)
        finally:
            folded.unpersist()

    def _query_id(self) -> str:
        """The id kept in this reconcile's checkpoint: a new checkpoint starts new txns."""
        return next(str(q.id) for q in self.spark.streams.active if q.name == self.query_name)

    # -- the steps --------------------------------------------------------------------

    def _read(self, table: str) -> DataFrame:
        return self.spark.read.format("delta").load(self.ledger.path(table))

    def _window_start(self) -> date:
        """The first root_state partition a run may touch: roots older are settled for it."""
        return (self.now - self.settings.reconcile.lookback).date()

    def _state(self, since: date) -> DataFrame:
        from pyspark.sql import functions as F

        return self._read(ROOT_STATE).where(F.col("first_event_date") >= F.lit(since))

    def _merge(self, rows: DataFrame, since: date, txn: tuple[str, int] | None) -> None:
        """MERGE rows into root_state, touching only partitions from `since` on."""
        from delta.tables import DeltaTable

        rows = rows.drop("known", "new_events")
        target = DeltaTable.forPath(self.spark, self.ledger.path(ROOT_STATE)).alias("t")
        condition = f"t.first_event_date >= DATE'{since.isoformat()}' AND t.root_id = s.root_id"
        with _idempotent(self.spark, txn):
            metrics = (
                target.merge(rows.alias("s"), condition)
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )
        first = metrics.first() if metrics is not None else None
        if first is not None:
            self.counts["roots_updated"] += int(first["num_affected_rows"])

    def _park(self, orphans: DataFrame, events: DataFrame, txn: tuple[str, int]) -> None:
        """Keep events whose root is unknown in unmatched_events, to retry next run."""
        from pyspark.sql import functions as F

        waiting = events.join(orphans.select("root_id"), "root_id", "left_semi").dropDuplicates(
            ["event_id"]
        )
        others = self._read(UNMATCHED_EVENTS)
        others = others.where(F.col("app") != self.app) if self.app else others.limit(0)
        (
            others.unionByName(waiting.select(*others.columns))
            .write.format("delta")
            .mode("overwrite")
            .option("txnAppId", f"{txn[0]}/unmatched")
            .option("txnVersion", txn[1])
            .save(self.ledger.path(UNMATCHED_EVENTS))
        )

    def _sweep(self) -> None:
        """Re-classify roots still in flight: a timeout needs no event to fire."""
        from pyspark.sql import functions as F

        since = self._window_start()
        state = self._state(since).where(F.col("status").isin(*status.OPEN))
        if self.app:
            state = state.where(F.col("app") == self.app)
        timeout, idle = policy_columns(self.settings, F.col("app"))
        new_status = classify(
            F.col("status"),
            complete=F.col("init_seen") & (F.col("xor_acc") == 0),
            failed=F.col("fail_event_id").isNotNull(),
            first_event_at=F.col("first_event_at"),
            last_event_at=F.col("last_event_at"),
            now=F.lit(self.now),
            timeout=timeout,
            idle_timeout=idle,
        )
        changed = (
            state.withColumn("new_status", new_status)
            .where(F.col("new_status") != F.col("status"))
            .withColumn("status", F.col("new_status"))
            .withColumn("status_changed_at", F.lit(self.now))
            .withColumn("reconciled_at", F.lit(self.now))
            .drop("new_status")
        )
        if not changed.isEmpty():
            self._merge(changed, since, None)

    def summary(self) -> dict[str, Any]:
        from pyspark.sql import functions as F

        state = self._read(ROOT_STATE)
        if self.app:
            state = state.where(F.col("app") == self.app)
        by_status = {
            r["status"]: r["n"]
            for r in state.groupBy("status").agg(F.count("*").alias("n")).collect()
        }
        waiting = self._read(UNMATCHED_EVENTS)
        if self.app:
            waiting = waiting.where(F.col("app") == self.app)
        unmatched = waiting.count()
        return {
            "app": self.app,
            "now": self.now.isoformat(),
            **self.counts,
            "unmatched_events": unmatched,
            "by_status": dict(sorted(by_status.items())),
        }


class _idempotent:
    """Delta's idempotent-DML session settings for one write: a re-run batch is skipped.

    The fold is idempotent on its own (seen event ids); this only saves the wasted MERGE.
    """

    def __init__(self, spark: SparkSession, txn: tuple[str, int] | None) -> None:
        self.conf = spark.conf
        self.txn = txn

    def __enter__(self) -> None:
        if self.txn is not None:
            self.conf.set("spark.databricks.delta.write.txnAppId", self.txn[0])
            self.conf.set("spark.databricks.delta.write.txnVersion", str(self.txn[1]))

    def __exit__(self, *exc: object) -> None:
        if self.txn is not None:
            self.conf.unset("spark.databricks.delta.write.txnAppId")
            self.conf.unset("spark.databricks.delta.write.txnVersion")


def reconcile(
    spark: SparkSession,
    settings: Settings,
    *,
    now: datetime | None = None,
    app: str | None = None,
) -> dict[str, Any]:
    """Fold the events new since the last run into root_state and return a summary.

    Holds the ledger lock (`ackfold.ledger.lock`): a replay's or another reconcile's MERGE
    into root_state would make one of the two fail on Delta's conflict check."""
    holder = f"reconcile --app {app}" if app else "reconcile"
    with ledger_lock(settings.var_dir, holder, say=log.info):
        return Reconciler(spark, settings, now=now, app=app).run()
