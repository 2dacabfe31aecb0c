"""The reconciler's algorithm as Spark expressions: the XOR fold of a batch of events per
root, the classification, and the next `root_state` rows.

`fold_events` and `classify` match `ackfold.reconcile.fold` (the plain Python reference)
row for row; `combine` joins a batch's fold to the roots' prior state and says what to do
with each row. The Delta plumbing around them (the stream of new events, what is read of
`root_state`, the writes) is `ackfold.reconcile.state` and `ackfold.reconcile.reconciler`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Final

from ackfold.config import Settings
from ackfold.config.policy import AppPolicy
from ackfold.ledger.schema import status
from ackfold.ledger.schema.contract import FAIL, INIT

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# What `combine` says to do with each row (its `change` column).
UPDATE: Final = "update"  # a root with state whose state changed: MERGE it
INSERT: Final = "insert"  # a root seen for the first time, its init folded: append it
PARK: Final = "park"  # events of a root with no state and no init yet: keep them waiting
# The parquet bytes of new events one partition of the fold takes: ackfold's encodings
# hold an event in about 11 bytes, about 100 once Spark reads it. At 10M events (112 MB)
# four partitions overflowed their tasks' memory on a 2g driver (2.6 GB spilled, the fold
# 31 s of 69); 16 spilled nothing (the fold 21 s). docs/benchmarks.md, 2026-12-06.
FOLD_PARTITION_BYTES: Final = 8 * 1024 * 1024


def fold_events(events: DataFrame, folded: DataFrame, partitions: int) -> DataFrame:
    """What a batch of events says about each root that its state has not heard yet.

    `events` are `ack_events` rows with a boolean `waiting` (true for the events kept in
    `unmatched_events` by earlier runs); `folded` is (root_id, seen_event_hashes) of the
    roots with state: the 64-bit hashes of the events they have already folded.

    One shuffle: the events are partitioned by root once, then copies of one event are
    dropped (grouped by root and event hash, with what the event says) and each root is
    folded, both on that same partitioning; `folded` meets them there. The per-root
    counts of the copies read (`read`, `waited`) come out of the same aggregation.
    An event whose hash the root already folded is left out of everything, as in the
    reference: XOR undoes itself.
    """
    from pyspark.sql import functions as F

    compact = events.select(
        "root_id", "app", "kind", "stage", "reason", "ack_val", "event_time", "waiting",
        event_hash(F.col("event_id")).alias("hash"),
    )  # fmt: skip
    distinct = (
        compact.repartition(partitions, "root_id")
        .groupBy("root_id", "hash", "app", "kind", "stage", "reason", "ack_val")
        .agg(
            F.min("event_time").alias("event_time"),  # the earliest copy wins
            F.count_if(~F.col("waiting")).alias("read"),
            F.count_if(F.col("waiting")).alias("waited"),
        )
    )
    seen = F.coalesce(F.array_contains("seen_event_hashes", F.col("hash")), F.lit(False))
    fresh = F.col("fresh")
    kind = F.col("kind")
    return (
        distinct.join(folded.hint("shuffle_hash"), "root_id", "left")
        .withColumn("fresh", ~seen)
        .groupBy("root_id")
        .agg(
            F.min("app").alias("app"),
            F.coalesce(F.bit_xor(F.when(fresh, F.col("ack_val"))), F.lit(0).cast("bigint")).alias(
                "xor"
            ),
            F.count_if(fresh).alias("fresh"),
            F.max(fresh & (kind == INIT)).alias("init_seen"),
            F.min(F.when(fresh, F.col("event_time"))).alias("first_event_at"),
            F.max(F.when(fresh, last_order("event_time", "stage"))).alias("last"),
            F.min(
                F.when(fresh & (kind == FAIL), fail_order("event_time", "stage", "reason"))
            ).alias("fail"),
            F.collect_list(F.when(fresh, F.col("hash"))).alias("hashes"),
            F.sum("read").alias("read"),
            F.sum("waited").alias("waited"),
        )
    )


def fold_partitions(new_bytes: int) -> int:
    """How many partitions the fold of `new_bytes` of new events needs at least, so that
    each task's aggregations fit in its memory.

    Example:
        >>> fold_partitions(0), fold_partitions(112 * 1024 * 1024)
        (1, 14)
    """
    return max(1, -(-new_bytes // FOLD_PARTITION_BYTES))


def last_order(at: str, stage: str) -> Column:
    """What orders events for `last_stage`: time, then stage, as in the reference."""
    from pyspark.sql import functions as F

    return F.struct(F.col(at).alias("event_time"), F.col(stage).alias("stage"))


def fail_order(at: str, stage: str, reason: str) -> Column:
    """What orders fail events for the earliest one: time, stage, then reason."""
    from pyspark.sql import functions as F

    return F.struct(
        F.col(at).alias("event_time"),
        F.col(stage).alias("stage"),
        F.coalesce(F.col(reason), F.lit("")).alias("reason"),
    )


def event_hash(event_id: Column) -> Column:
    """64 bits of an event id: what identifies an event within its root, and what a root
    remembers of the events it has folded (`ackfold.ledger.schema.ids.event_hash`)."""
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

    superseded = prior.isin(*status.SUPERSEDED)
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


def policy_columns(settings: Settings, app: Column) -> tuple[Column, Column]:
    """Per-app timeout and idle timeout as interval columns (defaults for unknown apps)."""
    from pyspark.sql import functions as F

    def interval(value: timedelta | None) -> Column:
        if value is None:
            return F.lit(None).cast("interval day to second")
        return F.expr(f"INTERVAL '{value.total_seconds():.6f}' SECOND")

    timeout = policy_column(settings, app, lambda p: interval(p.timeout))
    idle = policy_column(settings, app, lambda p: interval(p.idle_timeout))
    return timeout, idle


def combine(
    new: DataFrame,
    prior: DataFrame,
    known: DataFrame,
    roots: DataFrame,
    *,
    settings: Settings,
    now: Column,
) -> DataFrame:
    """New fold + prior state -> the next `root_state` rows, each with its `change`.

    `new` is `fold_events` of a batch (it may be empty), `prior` the state of the roots
    the reconciler keeps open (`ackfold.reconcile.state.open_state`), `known` the ids of
    the other roots with state that a batch may name (settled ones: their events change
    nothing), `roots` (root_id, attempt, origin_root_id) of the roots seen for the first
    time, `now` the run's time as a literal. Every prior root is classified again, events
    or not: a timeout needs no event to fire.
    """
    from pyspark.sql import functions as F

    n, s = new.alias("n"), prior.alias("s")
    settled = known.select("root_id", F.lit(True).alias("settled")).alias("k")
    row = (
        n.join(s.hint("shuffle_hash"), "root_id", "full_outer")
        .join(settled, "root_id", "left")
        .join(roots.alias("r"), "root_id", "left")
    )
    has_prior = F.col("s.root_id").isNotNull()
    prior_last = F.when(has_prior, last_order("s.last_event_at", "s.last_stage"))
    prior_fail = F.when(
        F.col("s.fail_at").isNotNull(), fail_order("s.fail_at", "s.fail_stage", "s.fail_reason")
    )
    fresh = F.coalesce(F.col("n.fresh"), F.lit(0))
    merged = row.select(
        F.col("root_id"),
        F.coalesce(F.col("s.app"), F.col("n.app")).alias("app"),
        F.col("s.status").alias("prior_status"),
        F.col("s.first_event_date").alias("prior_date"),
        has_prior.alias("has_prior"),
        F.coalesce(F.col("k.settled"), F.lit(False)).alias("settled"),
        fresh.alias("fresh"),
        (F.coalesce(F.col("s.xor_acc"), F.lit(0).cast("bigint")))
        .bitwiseXOR(F.coalesce(F.col("n.xor"), F.lit(0).cast("bigint")))
        .alias("xor_acc"),
        (F.coalesce(F.col("s.event_count"), F.lit(0).cast("bigint")) + fresh).alias("event_count"),
        F.greatest(prior_last, F.col("n.last")).alias("last"),
        F.least(prior_fail, F.col("n.fail")).alias("fail"),
        (
            F.coalesce(F.col("s.init_seen"), F.lit(False))
            | F.coalesce(F.col("n.init_seen"), F.lit(False))
        ).alias("init_seen"),
        F.least(F.col("s.first_event_at"), F.col("n.first_event_at")).alias("first_event_at"),
        F.col("s.status_changed_at").alias("prior_changed_at"),
        F.coalesce(F.col("s.attempt"), F.col("r.attempt")).alias("attempt"),
        F.coalesce(F.col("s.origin_root_id"), F.col("r.origin_root_id")).alias("origin_root_id"),
        F.concat(
            F.coalesce(F.col("s.seen_event_hashes"), F.array().cast("array<bigint>")),
            F.coalesce(F.col("n.hashes"), F.array().cast("array<bigint>")),
        ).alias("seen"),
        F.coalesce(F.col("s.first_event_date"), F.to_date(F.col("n.first_event_at"))).alias(
            "first_event_date"
        ),
        F.coalesce(F.col("n.read"), F.lit(0)).alias("read"),
        F.coalesce(F.col("n.waited"), F.lit(0)).alias("waited"),
        # A reason without a fail event: why the root timed out (`reconcile.timeouts`).
        F.when(F.col("s.fail_at").isNull(), F.col("s.fail_reason")).alias("prior_reason"),
    )
    prior_status = F.col("prior_status")
    last, fail = F.col("last"), F.col("fail")
    timeout, idle = policy_columns(settings, F.col("app"))
    new_status = classify(
        prior_status,
        complete=F.col("init_seen") & (F.col("xor_acc") == 0),
        failed=fail.isNotNull(),
        first_event_at=F.col("first_event_at"),
        last_event_at=last["event_time"],
        now=now,
        timeout=timeout,
        idle_timeout=idle,
    )
    changed = (F.col("fresh") > 0) | (F.col("status") != prior_status)
    change = (
        F.when(F.col("has_prior"), F.when(changed, F.lit(UPDATE)))
        .when(F.col("settled"), F.lit(None))
        .when(F.col("init_seen"), F.lit(INSERT))
        .otherwise(F.lit(PARK))
    )
    completed = F.col("status").isin(status.COMPLETED, status.COMPLETED_LATE)
    return merged.withColumn("status", new_status).select(
        "root_id",
        "app",
        "status",
        "xor_acc",
        "event_count",
        "first_event_at",
        last["event_time"].alias("last_event_at"),
        F.when(F.col("status") == prior_status, F.col("prior_changed_at"))
        .otherwise(now)
        .alias("status_changed_at"),
        "attempt",
        "origin_root_id",
        last["stage"].alias("last_stage"),
        F.coalesce(
            F.nullif(fail["reason"], F.lit("")), F.when(fail.isNull(), F.col("prior_reason"))
        ).alias("fail_reason"),
        fail["stage"].alias("fail_stage"),
        fail["event_time"].alias("fail_at"),
        "init_seen",
        # A completed tree ignores every later event: its event hashes need not be kept.
        F.when(completed, F.array().cast("array<bigint>"))
        .otherwise(F.col("seen"))
        .alias("seen_event_hashes"),
        now.alias("reconciled_at"),
        "first_event_date",
        "prior_status",
        "prior_date",
        change.alias("change"),
        "fresh",
        "read",
        "waited",
    )
