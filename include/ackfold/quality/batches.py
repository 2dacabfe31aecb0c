"""What the quality checks look at: Spark DataFrames of the ledger, one per batch.

Every batch is bounded by the run's window (`quality.window` before now): events written,
roots registered and `root_state` partitions in it, so a run costs what the window
holds, not the ledger's history. A few columns are derived here, where a check needs
more than one row or one table (the origin chain, the outcome of an overdue root), so
that each expectation stays a plain column check that Data Docs can show.

Example:
    >>> window = Window.ending(datetime(2026, 11, 23, 12, tzinfo=UTC), timedelta(days=2))
    >>> window.start
    datetime.datetime(2026, 11, 21, 12, 0)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from ackfold import status
from ackfold.config import AppPolicy, Settings
from ackfold.reconcile import policy_column
from ackfold.tables import (
    ACK_EVENTS,
    REPLAY_LOG,
    ROOT_STATE,
    ROOTS,
    SENT_MESSAGES,
    Ledger,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# An overdue root is settled when it ended in one of these; anything else is lost.
SETTLED_OUTCOMES: Final = (
    status.COMPLETED,
    status.COMPLETED_LATE,
    status.REPLAYED,
    status.DEAD_LETTERED,
)
VALID_CHAIN: Final = "valid"


@dataclass(frozen=True)
class Window:
    """The run's time bounds, as naive UTC (how Spark compares timestamps here)."""

    start: datetime
    now: datetime

    @classmethod
    def ending(cls, now: datetime, length: timedelta) -> Window:
        now = now.astimezone(UTC).replace(tzinfo=None)
        return cls(start=now - length, now=now)

    def overdue_before(self, policy: AppPolicy) -> datetime:
        """Roots registered before this should have settled: timeout plus grace ago."""
        return self.now - policy.timeout - policy.quality.grace


class LedgerFrames:
    """The batches of one quality run over the ledger at `settings.table_root`."""

    def __init__(
        self, spark: SparkSession, settings: Settings, window: Window, *, app: str | None = None
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.window = window
        self.app = app
        self.ledger = Ledger(settings.table_root)

    def _table(self, name: str) -> DataFrame:
        """A ledger table; only `app`'s rows when the run is for one app."""
        from pyspark.sql import functions as F

        frame = self.spark.read.format("delta").load(self.ledger.path(name))
        return frame if self.app is None else frame.where(F.col("app") == self.app)

    # -- ledger soundness ------------------------------------------------------------------

    def ack_events(self) -> DataFrame:
        from pyspark.sql import functions as F

        # Appends come in time order: file statistics skip everything older.
        return self._table(ACK_EVENTS).where(F.col("event_time") >= F.lit(self.window.start))

    def roots(self) -> DataFrame:
        """Roots registered in the window, with `origin_chain` ("valid", or what is wrong),
        `max_attempts` (the app's policy) and `sent_by_hand` (a manual replay sent it: a
        person may replay a root beyond its attempts, the automatic replay may not)."""
        from pyspark.sql import functions as F

        roots = self._table(ROOTS).where(F.col("ingested_at") >= F.lit(self.window.start))
        # The attempts before, looked up only for the origins of later attempts in the
        # window (a manual replay may follow an attempt registered long before).
        later = roots.where(F.col("attempt") > 1).select("origin_root_id").distinct()
        previous = (
            self._table(ROOTS)
            .select("origin_root_id", (F.col("attempt") + 1).alias("attempt"))
            .join(later, "origin_root_id", "left_semi")
            .distinct()
            .withColumn("previous_registered", F.lit(True))
        )
        by_hand = (
            self._table(REPLAY_LOG)
            .where(
                (F.col("event") == "sent")
                & (F.col("requested_by") != "auto")
                & ~F.col("dry_run")
                & F.col("new_root_id").isNotNull()
            )
            .select(F.col("new_root_id").alias("root_id"))
            .distinct()
            .withColumn("sent_by_hand", F.lit(True))
        )
        chain = (
            F.when(
                (F.col("attempt") == 1) & (F.col("origin_root_id") != F.col("root_id")),
                F.lit("attempt 1 is not its own origin"),
            )
            .when(
                (F.col("attempt") > 1) & (F.col("origin_root_id") == F.col("root_id")),
                F.format_string("attempt %d names itself as its origin", F.col("attempt")),
            )
            .when(
                (F.col("attempt") > 1) & F.col("previous_registered").isNull(),
                F.format_string("attempt %d is not registered", F.col("attempt") - 1),
            )
            .otherwise(F.lit(VALID_CHAIN))
        )
        max_attempts = policy_column(self.settings, F.col("app"), lambda p: F.lit(p.max_attempts))
        return (
            roots.join(previous, ["origin_root_id", "attempt"], "left")
            .join(by_hand, "root_id", "left")
            .withColumn("origin_chain", chain)
            .withColumn("max_attempts", max_attempts)
            .withColumn("sent_by_hand", F.coalesce(F.col("sent_by_hand"), F.lit(False)))
            .drop("previous_registered")
        )

    def root_state(self) -> DataFrame:
        from pyspark.sql import functions as F

        # A partition filter: only the window's partitions are read.
        return self._table(ROOT_STATE).where(
            F.col("first_event_date") >= F.lit(self.window.start.date())
        )

    # -- delivery guarantees, per app ------------------------------------------------------

    def _overdue_roots(self, app: str) -> DataFrame:
        """The app's roots registered in the window that should have settled by now."""
        from pyspark.sql import functions as F

        cutoff = self.window.overdue_before(self.settings.app(app))
        return self._table(ROOTS).where(
            (F.col("app") == app)
            & (F.col("ingested_at") >= F.lit(self.window.start))
            & (F.col("ingested_at") < F.lit(cutoff))
        )

    def _states(self) -> DataFrame:
        # A root registered in the window has its first event in it, or a day before at
        # most (its clock and the app's may differ by seconds across midnight).
        from pyspark.sql import functions as F

        first_day = (self.window.start - timedelta(days=1)).date()
        return self._table(ROOT_STATE).where(F.col("first_event_date") >= F.lit(first_day))

    def overdue(self, app: str) -> DataFrame:
        """One row per overdue root of `app` with its `outcome`: a status in
        `SETTLED_OUTCOMES`, or why the root counts as lost."""
        from pyspark.sql import functions as F

        policy = self.settings.app(app)
        overdue = self._overdue_roots(app).select("root_id", "origin_root_id", "attempt")
        states = self._states().select("root_id", "status", "status_changed_at")
        registered = (
            self._table(ROOTS)
            .where((F.col("app") == app) & (F.col("ingested_at") >= F.lit(self.window.start)))
            .select("origin_root_id", (F.col("attempt") - 1).alias("attempt"))
            .distinct()
            .withColumn("next_registered", F.lit(True))
        )
        # A replay sent within the grace period may not have been consumed yet.
        in_flight = F.col("status_changed_at") >= F.lit(self.window.now - policy.quality.grace)
        replayed = F.col("status") == status.REPLAYED
        outcome = (
            F.when(F.col("status").isNull(), F.lit("never reconciled: no event of it folded"))
            .when(F.col("status").isin(*SETTLED_OUTCOMES) & ~replayed, F.col("status"))
            .when(replayed & (F.col("next_registered") | in_flight), F.col("status"))
            .when(replayed, F.lit("replayed, but the next attempt never registered"))
            .when(F.col("status") == status.FAILED, F.lit("failed, and not replayed"))
            .when(F.col("status") == status.TIMED_OUT, F.lit("timed out, and not replayed"))
            .otherwise(F.concat(F.col("status"), F.lit(" past its timeout")))
        )
        return (
            overdue.join(states, "root_id", "left")
            .join(registered, ["origin_root_id", "attempt"], "left")
            .withColumn("next_registered", F.coalesce(F.col("next_registered"), F.lit(False)))
            .withColumn("outcome", outcome)
            .select("root_id", "attempt", "status", "outcome")
        )

    def sent(self, app: str) -> DataFrame:
        """The messages producers report they sent for `app` (table `sent_messages`), old
        enough to have been consumed, each with `registered`: a root of attempt 1 has
        their queue and message id."""
        from pyspark.sql import functions as F

        cutoff = self.window.overdue_before(self.settings.app(app))
        sent = self._table(SENT_MESSAGES).where(
            (F.col("app") == app)
            & (F.col("sent_at") >= F.lit(self.window.start))
            & (F.col("sent_at") < F.lit(cutoff))
        )
        roots = (
            self._table(ROOTS)
            .where(
                (F.col("app") == app)
                & (F.col("attempt") == 1)
                & (F.col("ingested_at") >= F.lit(self.window.start))
            )
            .select("source_queue", "source_message_id")
            .distinct()
            .withColumn("registered", F.lit(True))
        )
        return (
            sent.join(roots, ["source_queue", "source_message_id"], "left")
            .withColumn("registered", F.coalesce(F.col("registered"), F.lit(False)))
            .select("source_queue", "source_message_id", "sent_at", "registered")
        )

    def delivery(self, app: str) -> DataFrame:
        """One row for `app`: over the messages (attempt-1 roots) that should have
        settled, the fraction delivered more than once (an attempt `completed_late`) and
        the fraction dead-lettered (their last attempt is); over the app's completed
        roots, the 99th percentile of the complete latency in seconds (null if none)."""
        from pyspark.sql import functions as F

        messages = self._overdue_roots(app).where(F.col("attempt") == 1).select("origin_root_id")
        states = self._states().where(F.col("app") == app)
        per_message = (
            states.join(messages, "origin_root_id", "left_semi")
            .groupBy("origin_root_id")
            .agg(
                F.max((F.col("status") == status.COMPLETED_LATE).cast("int")).alias("late"),
                F.max_by("status", "attempt").alias("last_status"),
            )
        )
        rates = per_message.agg(
            F.sum("late").alias("duplicated"),
            F.sum((F.col("last_status") == status.DEAD_LETTERED).cast("int")).alias("dead"),
        )
        latency = (
            states.where(
                (F.col("status") == status.COMPLETED)
                & (F.col("status_changed_at") >= F.lit(self.window.start))
            )
            .select(_seconds_between("first_event_at", "last_event_at").alias("latency_s"))
            .agg(
                F.percentile_approx("latency_s", 0.99, 10_000).alias("latency_p99_s"),
                F.count("*").alias("completed"),
            )
        )
        count = messages.agg(F.count("*").alias("messages"))

        def rate(column: str) -> Column:
            share = F.coalesce(F.col(column), F.lit(0)) / F.col("messages")
            return F.when(F.col("messages") > 0, share).otherwise(F.lit(0.0))

        return (
            count.crossJoin(rates)
            .crossJoin(latency)
            .select(
                F.lit(app).alias("app"),
                "messages",
                rate("duplicated").alias("duplicate_rate"),
                rate("dead").alias("dead_letter_rate"),
                "completed",
                F.col("latency_p99_s").cast("double").alias("latency_p99_s"),
            )
        )

    def apps(self, only: str | None = None) -> list[str]:
        """The apps to check: `only`, or every app with roots registered, or messages
        reported sent, in the window."""
        from pyspark.sql import functions as F

        if only is not None:
            return [only]
        start = F.lit(self.window.start)
        seen = (
            self._table(ROOTS)
            .where(F.col("ingested_at") >= start)
            .select("app")
            .union(self._table(SENT_MESSAGES).where(F.col("sent_at") >= start).select("app"))
            .distinct()
            .collect()
        )
        return sorted(row["app"] for row in seen)


def _seconds_between(start: str, end: str) -> Column:
    from pyspark.sql import functions as F

    return F.unix_micros(F.col(end)) / 1e6 - F.unix_micros(F.col(start)) / 1e6
