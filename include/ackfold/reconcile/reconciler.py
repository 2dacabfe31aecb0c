"""The reconciler: Storm's acker, as an incremental batch fold over the Delta ledger.

Each run reads only the `ack_events` appended since the last run (a Delta streaming read
with `availableNow` and a checkpoint), drops duplicate events, XOR-folds them per root
into `root_state` with one MERGE per micro-batch, and finally re-classifies the roots
still in flight, so that timeouts fire even when no event arrives.

`fold_events` and `classify` are the algorithm; they match `ackfold.reconcile.fold` (the plain
Python reference) row for row. The rest is plumbing around them.

Example:
    >>> from ackfold.reconcile.reconciler import reconcile
    >>> summary = reconcile(spark, settings)          # doctest: +SKIP
    >>> summary["by_status"]                          # doctest: +SKIP
    {'completed': 1998, 'failed': 2}
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ackfold.config import AppPolicy, Settings
from ackfold.ledger import status
from ackfold.ledger.lock import ledger_lock
from ackfold.ledger.tables import ACK_EVENTS, ROOT_STATE, ROOTS, UNMATCHED_EVENTS, Ledger

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("ackfold.reconcile")

CHECKPOINTS = "_checkpoints"
_APP_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")
TXN_APP = "ackfold-reconcile"


def check_app_name(app: str) -> str:
    """`app`, if it is a plain name: it becomes part of a checkpoint path."""
    if not _APP_NAME.match(app):
        raise ValueError(f"app {app!r} is not an app name: use letters, digits, '.', '_', '-'")
    return app


def fold_events(events: DataFrame) -> DataFrame:
    """What a batch of events says about each root, its duplicates dropped.

    One aggregation by root: the distinct (event hash, ack val) pairs, still to be XORed
    once the root's already-folded events are taken out (`Reconciler._combine`), and the
    order-insensitive facts (init seen, first, latest and earliest-fail events), which a
    duplicate cannot change.
    """
    from pyspark.sql import functions as F

    kind = F.col("kind")
    return events.groupBy("root_id").agg(
        F.min("app").alias("app"),
        F.collect_set(
            F.struct(event_hash(F.col("event_id")).alias("hash"), F.col("ack_val").alias("val"))
        ).alias("events"),
        F.max(kind == "init").alias("init_seen"),
        F.min("event_time").alias("first_event_at"),
        # Latest and earliest-fail events, ties broken by event_id as in ackfold.reconcile.fold.
        F.max(F.struct("event_time", "event_id", "stage")).alias("last"),
        F.min(F.when(kind == "fail", F.struct("event_time", "event_id", "stage", "reason"))).alias(
            "fail"
        ),
    )


def xor_fold(values: Column) -> Column:
    """The XOR of an array of ack vals: Storm's acker, for one root."""
    from pyspark.sql import functions as F

    return F.aggregate(values, F.lit(0).cast("bigint"), lambda acc, val: acc.bitwiseXOR(val))


def event_hash(event_id: Column) -> Column:
    """64 bits of an event id: what a root remembers of the events it has folded."""
    from pyspark.sql import functions as F

    return F.xxhash64(event_id)


def classify(
    prior: Column,
    *,
    complete: Column,
    failed: Column,
    first_event_at: Column,
    last_event_at: Column,
    now: Column,
    timeout: Column,
    idle_timeout: Column,
) -> Column:
    """The status of a folded root, as `ackfold.reconcile.fold.classify` decides it."""
    from pyspark.sql import functions as F

    superseded = prior.isin(status.REPLAYED, status.DEAD_LETTERED)
    timed_out = ((now - first_event_at) > timeout) & (
        idle_timeout.isNull() | ((now - last_event_at) > idle_timeout)
    )
    return (
        F.when(prior.isin(status.COMPLETED, status.COMPLETED_LATE), prior)
        .when(failed, F.when(superseded, prior).otherwise(F.lit(status.FAILED)))
        .when(
            complete, F.when(superseded, F.lit(status.COMPLETED_LATE)).otherwise(status.COMPLETED)
        )
        .when(superseded, prior)
        .when(timed_out, F.lit(status.TIMED_OUT))
        .otherwise(F.lit(status.PENDING))
    )


def policy_column(settings: Settings, app: Column, value: Callable[[AppPolicy], Column]) -> Column:
    """`value` of each row's app policy, as one CASE over the configured apps (the
    defaults for the others)."""
    from pyspark.sql import functions as F

    column = value(settings.defaults)
    for name in settings.apps:
        column = F.when(app == F.lit(name), value(settings.app(name))).otherwise(column)
    return column


def _policy_columns(settings: Settings, app: Column) -> tuple[Column, Column]:
    """Per-app timeout and idle timeout as interval columns (defaults for unknown apps)."""
    from pyspark.sql import functions as F

    def interval(value: timedelta | None) -> Column:
        if value is None:
            return F.lit(None).cast("interval day to second")
        return F.expr(f"INTERVAL '{value.total_seconds():.6f}' SECOND")

    timeout = policy_column(settings, app, lambda p: interval(p.timeout))
    idle = policy_column(settings, app, lambda p: interval(p.idle_timeout))
    return timeout, idle


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
        folded = self._combine(fold_events(events), state, since).cache()
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

    def _combine(self, new: DataFrame, state: DataFrame, since: date) -> DataFrame:
        """New fold + prior state -> the next root_state rows, with `known` = has a home."""
        from pyspark.sql import functions as F

        s = state.alias("s")
        n = new.alias("n")
        roots = (
            self._read(ROOTS)
            .where(F.col("ingested_at") >= F.lit(datetime.combine(since, datetime.min.time())))
            .select("root_id", "attempt", "origin_root_id")
            .dropDuplicates(["root_id"])
            .alias("r")
        )
        row = n.join(s, "root_id", "left").join(roots, "root_id", "left")
        has_prior = F.col("s.root_id").isNotNull()
        prior_last = F.when(
            has_prior,
            F.struct(
                F.col("s.last_event_at").alias("event_time"),
                F.col("s.last_event_id").alias("event_id"),
                F.col("s.last_stage").alias("stage"),
            ),
        )
        prior_fail = F.when(
            F.col("s.fail_event_id").isNotNull(),
            F.struct(
                F.col("s.fail_at").alias("event_time"),
                F.col("s.fail_event_id").alias("event_id"),
                F.col("s.fail_stage").alias("stage"),
                F.col("s.fail_reason").alias("reason"),
            ),
        )
        # Drop what this root already folded: XOR undoes itself, a duplicate must not count.
        prior_seen = F.coalesce(F.col("s.seen_event_hashes"), F.array().cast("array<bigint>"))
        fresh = F.filter("n.events", lambda e: ~F.array_contains(prior_seen, e["hash"]))
        # Two projections, so that each array expression is computed once per root.
        merged = row.select(
            F.col("root_id"),
            F.coalesce(F.col("s.app"), F.col("n.app")).alias("app"),
            F.col("s.status").alias("prior_status"),
            has_prior.alias("has_prior"),
            fresh.alias("fresh"),
            prior_seen.alias("prior_seen"),
            F.coalesce(F.col("s.xor_acc"), F.lit(0).cast("bigint")).alias("prior_xor"),
            F.coalesce(F.col("s.event_count"), F.lit(0).cast("bigint")).alias("prior_count"),
            F.greatest(prior_last, F.col("n.last")).alias("last"),
            F.least(prior_fail, F.col("n.fail")).alias("fail"),
            (F.coalesce(F.col("s.init_seen"), F.lit(False)) | F.col("n.init_seen")).alias(
                "init_seen"
            ),
            F.least(F.col("s.first_event_at"), F.col("n.first_event_at")).alias("first_event_at"),
            F.col("s.status_changed_at").alias("prior_changed_at"),
            F.coalesce(F.col("s.attempt"), F.col("r.attempt")).alias("attempt"),
            F.coalesce(F.col("s.origin_root_id"), F.col("r.origin_root_id")).alias(
                "origin_root_id"
            ),
            F.coalesce(F.col("s.first_event_date"), F.to_date(F.col("n.first_event_at"))).alias(
                "first_event_date"
            ),
            # A new root must start inside the window, or a later run could not find it
            # and would insert it twice: older ones wait in unmatched_events.
            (
                has_prior
                | (F.col("n.init_seen") & (F.to_date(F.col("n.first_event_at")) >= F.lit(since)))
            ).alias("known"),
        )
        prior_status = F.col("prior_status")
        # A complete tree ignores every later event; a root with nothing new needs no write.
        settled = F.coalesce(
            prior_status.isin(status.COMPLETED, status.COMPLETED_LATE), F.lit(False)
        )
        merged = merged.where(~settled & (~F.col("has_prior") | (F.size("fresh") > 0)))
        xor_acc = F.col("prior_xor").bitwiseXOR(xor_fold(F.transform("fresh", lambda e: e["val"])))
        last, fail = F.col("last"), F.col("fail")
        app = F.col("app")
        timeout, idle = _policy_columns(self.settings, app)
        new_status = classify(
            prior_status,
            complete=F.col("init_seen") & (xor_acc == 0),
            failed=fail.isNotNull(),
            first_event_at=F.col("first_event_at"),
            last_event_at=last["event_time"],
            now=F.lit(self.now),
            timeout=timeout,
            idle_timeout=idle,
        )
        now = F.lit(self.now)
        seen = F.concat("prior_seen", F.transform("fresh", lambda e: e["hash"]))
        return merged.withColumn("status", new_status).select(
            "root_id",
            "app",
            "status",
            xor_acc.alias("xor_acc"),
            (F.col("prior_count") + F.size("fresh")).alias("event_count"),
            "first_event_at",
            last["event_time"].alias("last_event_at"),
            F.when(F.col("status") == prior_status, F.col("prior_changed_at"))
            .otherwise(now)
            .alias("status_changed_at"),
            "attempt",
            "origin_root_id",
            last["stage"].alias("last_stage"),
            fail["reason"].alias("fail_reason"),
            fail["stage"].alias("fail_stage"),
            fail["event_time"].alias("fail_at"),
            fail["event_id"].alias("fail_event_id"),
            last["event_id"].alias("last_event_id"),
            "init_seen",
            # A completed tree ignores every later event: its event hashes need not be kept.
            F.when(
                F.col("status").isin(status.COMPLETED, status.COMPLETED_LATE),
                F.array().cast("array<bigint>"),
            )
            .otherwise(seen)
            .alias("seen_event_hashes"),
            now.alias("reconciled_at"),
            "first_event_date",
            "known",
            F.size("fresh").alias("new_events"),
        )

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
        timeout, idle = _policy_columns(self.settings, F.col("app"))
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
