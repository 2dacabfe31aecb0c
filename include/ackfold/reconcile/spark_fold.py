"""The reconciler's algorithm as Spark expressions: the XOR fold of a batch of events per
root, the classification, and the next `root_state` rows.

`fold_events` and `classify` match `ackfold.reconcile.fold` (the plain Python reference)
row for row; `combine` joins a batch's fold to the roots' prior state, dropping what each
root already folded. The Delta plumbing around them (the stream of new events, the MERGE,
the unmatched events, the timeout sweep) is `ackfold.reconcile.reconciler`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from ackfold.config import Settings
from ackfold.config.policy import AppPolicy
from ackfold.ledger import status

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def fold_events(events: DataFrame) -> DataFrame:
    """What a batch of events says about each root, its duplicates dropped.

    One aggregation by root: the distinct (event hash, ack val) pairs, still to be XORed
    once the root's already-folded events are taken out (`combine`), and the
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
    state: DataFrame,
    roots: DataFrame,
    since: date,
    *,
    settings: Settings,
    now: Column,
) -> DataFrame:
    """New fold + prior state -> the next root_state rows, with `known` = has a home.

    `new` is `fold_events` of a batch, `state` the `root_state` rows from `since` on,
    `roots` the `roots` table (attempts and origins of new roots), `now` the run's
    time as a literal column."""
    from pyspark.sql import functions as F

    s = state.alias("s")
    n = new.alias("n")
    roots = (
        roots.where(F.col("ingested_at") >= F.lit(datetime.combine(since, datetime.min.time())))
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
        (F.coalesce(F.col("s.init_seen"), F.lit(False)) | F.col("n.init_seen")).alias("init_seen"),
        F.least(F.col("s.first_event_at"), F.col("n.first_event_at")).alias("first_event_at"),
        F.col("s.status_changed_at").alias("prior_changed_at"),
        F.coalesce(F.col("s.attempt"), F.col("r.attempt")).alias("attempt"),
        F.coalesce(F.col("s.origin_root_id"), F.col("r.origin_root_id")).alias("origin_root_id"),
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
    settled = F.coalesce(prior_status.isin(status.COMPLETED, status.COMPLETED_LATE), F.lit(False))
    merged = merged.where(~settled & (~F.col("has_prior") | (F.size("fresh") > 0)))
    xor_acc = F.col("prior_xor").bitwiseXOR(xor_fold(F.transform("fresh", lambda e: e["val"])))
    last, fail = F.col("last"), F.col("fail")
    app = F.col("app")
    timeout, idle = policy_columns(settings, app)
    new_status = classify(
        prior_status,
        complete=F.col("init_seen") & (xor_acc == 0),
        failed=fail.isNotNull(),
        first_event_at=F.col("first_event_at"),
        last_event_at=last["event_time"],
        now=now,
        timeout=timeout,
        idle_timeout=idle,
    )
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
