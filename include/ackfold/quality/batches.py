"""What the quality checks look at: Spark DataFrames of the ledger, one per batch.

Every batch is bounded by the run's window (`quality.window` before now): events written,
roots registered, replays sent and `root_state` partitions in it (a day more where rows
of different writers are joined, for clock skew), so a run costs what the window holds,
not the ledger's history. A few columns are derived here, where a check needs more than
one row or one table (the origin chain, the outcome of an overdue root), so that each
expectation stays a plain column check that Data Docs can show.

The contract lets a writer append an event or a root twice (an SQS message delivered
again before its delete registers again, under the same ids): the fold drops such exact
duplicates, and so do the checks. What they report are rows that share an id but not
what it identifies, which the fold would silently get wrong.

Example:
    >>> window = Window.ending(datetime(2026, 11, 23, 12, tzinfo=UTC), timedelta(days=2))
    >>> window.start
    datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.timezone.utc)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from ackfold.config import Settings
from ackfold.config.policy import AppPolicy
from ackfold.ledger.schema import status
from ackfold.ledger.schema.contract import CLOCK_SKEW
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    DEAD_LETTERS,
    REPLAY_LOG,
    ROOT_STATE,
    ROOTS,
    SENT_MESSAGES,
    Ledger,
)
from ackfold.quality.outcomes import overdue_outcome
from ackfold.reconcile.spark_fold import policy_column
from ackfold.replay.bookkeeping import AUTOMATIC
from ackfold.replay.planner import REPLAY, SENT
from ackfold.sources.base import EXPIRED, NO_SENDER

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

VALID_CHAIN: Final = "valid"
# What an event says: copies of one event (a redelivery) agree in these.
EVENT_CONTENT: Final = ("app", "kind", "ack_val", "stage")
# What identifies a root: rows equal in these are one (a redelivery).
ROOT_IDENTITY: Final = (
    "root_id",
    "app",
    "attempt",
    "origin_root_id",
    "source",
    "source_queue",
    "source_message_id",
)


@dataclass(frozen=True)
class Window:
    """The run's time bounds, in UTC (timezone-aware: Spark converts naive datetimes with
    the driver's local time zone)."""

    start: datetime
    now: datetime

    @classmethod
    def ending(cls, now: datetime, length: timedelta) -> Window:
        now = now.astimezone(UTC)
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

    def _since(self, name: str, column: str, margin: timedelta = timedelta(0)) -> DataFrame:
        """`name`'s rows whose `column` is in the window (appends come in time order:
        file statistics skip the older files)."""
        from pyspark.sql import functions as F

        return self._table(name).where(F.col(column) >= F.lit(self.window.start - margin))

    # -- ledger soundness ------------------------------------------------------------------

    def ack_events(self) -> DataFrame:
        """Events written in the window, as written. A redelivered event's copies are
        rows like the others: a column check finds each copy of a bad row, and
        `event_id_unique` groups by the fold's own key (root, hash of the id), as the
        fold does, to find ids that name two different events: `says` is what each row
        says (`EVENT_CONTENT`, those the writer kept) as one hash. No de-duplication of
        every event first: on 10M events that was half of a quality run."""
        from pyspark.sql import functions as F

        events = self._since(ACK_EVENTS, "event_time")
        content = [c for c in EVENT_CONTENT if c in events.columns]
        return events.withColumn("says", F.xxhash64(*content) if content else F.lit(0))

    def _window_roots(self) -> DataFrame:
        return _distinct(self._since(ROOTS, "ingested_at"), ROOT_IDENTITY, "ingested_at")

    def _replays_sent(self) -> DataFrame:
        """The sends in `replay_log` that made the roots of the window: root_id (the new
        one), attempt, origin_root_id, by_hand."""
        from pyspark.sql import functions as F

        return (
            self._since(REPLAY_LOG, "sent_at", CLOCK_SKEW)
            .where(
                (F.col("event") == SENT)
                & (F.col("action") == REPLAY)
                & ~F.col("dry_run")
                & F.col("new_root_id").isNotNull()
            )
            .groupBy(F.col("new_root_id").alias("root_id"), "attempt", "origin_root_id")
            .agg(F.max(F.col("requested_by") != AUTOMATIC).alias("by_hand"))
        )

    def roots(self) -> DataFrame:
        """Roots registered in the window, with `origin_chain` ("valid", or what is wrong),
        `max_attempts` (the app's policy) and `sent_by_hand` (a manual replay sent it: a
        person may replay a root beyond its attempts, the automatic replay may not).

        Attempt n follows attempt n-1 when that one is registered in the window too, or
        when the replay that sent attempt n names it (a manual replay may follow an
        attempt registered long before the window). Payloads are nulled, not dropped: the
        schema checks see their type, and no payload is cached."""
        from pyspark.sql import functions as F

        roots = self._window_roots()
        sends = self._replays_sent()
        previous = (
            roots.select("origin_root_id", (F.col("attempt") + 1).alias("attempt"))
            .union(sends.select("origin_root_id", "attempt"))
            .distinct()
            .withColumn("previous_registered", F.lit(True))
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
        by_hand = sends.where("by_hand").select("root_id", F.lit(True).alias("sent_by_hand"))
        payload_type = roots.schema["payload"].dataType if "payload" in roots.columns else None
        if payload_type is not None:
            roots = roots.withColumn("payload", F.lit(None).cast(payload_type))
        return (
            roots.join(previous, ["origin_root_id", "attempt"], "left")
            .join(by_hand, "root_id", "left")
            .withColumn("origin_chain", chain)
            .withColumn("max_attempts", max_attempts)
            .withColumn("sent_by_hand", F.coalesce(F.col("sent_by_hand"), F.lit(False)))
            .drop("previous_registered")
        )

    def root_state(self, margin: timedelta = timedelta(0)) -> DataFrame:
        """`root_state` rows first seen in the window (less `margin`): a partition filter,
        so only those partitions are read."""
        from pyspark.sql import functions as F

        first_day = (self.window.start - margin).date()
        return self._table(ROOT_STATE).where(F.col("first_event_date") >= F.lit(first_day))

    def _states(self, margin: timedelta) -> DataFrame:
        """`root_state(margin)` and the unsettled roots first seen before it: what an
        overdue root's outcome is read from (partition filters only)."""
        from pyspark.sql import functions as F

        first_day = (self.window.start - margin).date()
        return self._table(ROOT_STATE).where(
            (F.col("first_event_date") >= F.lit(first_day))
            | F.col("status").isin(*status.UNSETTLED)
        )

    # -- delivery guarantees, per app ------------------------------------------------------

    def _overdue_roots(self, app: str) -> DataFrame:
        """(root_id, origin_root_id, attempt) of the app's roots that should have settled by
        now: those registered in the window past their timeout and grace, and those still
        unsettled from before the window, however old (a reconciler, an app or Airflow
        away for longer than the window leaves them there). Those are read from the
        unsettled partitions of `root_state`, never from settled history."""
        from pyspark.sql import functions as F

        cutoff = self.window.overdue_before(self.settings.app(app))
        registered = self._window_roots().where(
            (F.col("app") == app) & (F.col("ingested_at") < F.lit(cutoff))
        )
        older = self._table(ROOT_STATE).where(
            F.col("status").isin(*status.UNSETTLED)
            & (F.col("first_event_date") < F.lit(self.window.start.date()))
            & (F.col("app") == app)
        )
        columns = ("root_id", "origin_root_id", "attempt")
        return (
            registered.select(*columns)
            .unionByName(older.select(*columns))
            .dropDuplicates(["root_id"])
        )

    def overdue(self, app: str) -> DataFrame:
        """One row per overdue root of `app` with its `outcome`
        (`ackfold.quality.outcomes.overdue_outcome`): one of `SETTLED_OUTCOMES`, or why
        the root counts as lost."""
        from pyspark.sql import functions as F

        policy = self.settings.app(app)
        states = self._states(CLOCK_SKEW).select(
            "root_id", "status", "status_changed_at", "first_event_at", "last_event_at", "fail_at"
        )
        registered = (
            self._window_roots()
            .where(F.col("app") == app)
            .select("origin_root_id", (F.col("attempt") - 1).alias("attempt"))
            .distinct()
            .withColumn("next_registered", F.lit(True))
        )
        # Dead-lettered because the source deleted the message before its replay: it was
        # never processed, and nothing is left to replay. A lost message.
        expired = (
            self._since(DEAD_LETTERS, "dead_lettered_at", CLOCK_SKEW)
            .where(F.col("reason") == EXPIRED)
            .select("root_id", F.lit(True).alias("expired"))
            .distinct()
        )
        # Dead-lettered at once because its source has no sender: settled, and says so.
        no_sender = (
            self._since(DEAD_LETTERS, "dead_lettered_at", CLOCK_SKEW)
            .where(F.col("reason").startswith(NO_SENDER))
            .select("root_id", F.lit(True).alias("no_sender"))
            .distinct()
        )
        return (
            self._overdue_roots(app)
            .select("root_id", "origin_root_id", "attempt")
            .join(states, "root_id", "left")
            .join(registered, ["origin_root_id", "attempt"], "left")
            .join(expired, "root_id", "left")
            .join(no_sender, "root_id", "left")
            .withColumn("next_registered", F.coalesce(F.col("next_registered"), F.lit(False)))
            .withColumn("expired", F.coalesce(F.col("expired"), F.lit(False)))
            .withColumn("no_sender", F.coalesce(F.col("no_sender"), F.lit(False)))
            .withColumn("outcome", overdue_outcome(policy, self.window.now))
            .select("root_id", "attempt", "status", "outcome")
        )

    def sent(self, app: str) -> DataFrame:
        """The messages producers report they sent for `app` (table `sent_messages`), old
        enough to have been consumed, each with `registered`: a root of attempt 1 has
        their queue and message id."""
        from pyspark.sql import functions as F

        cutoff = self.window.overdue_before(self.settings.app(app))
        sent = self._since(SENT_MESSAGES, "sent_at").where(
            (F.col("app") == app) & (F.col("sent_at") < F.lit(cutoff))
        )
        roots = (
            self._since(ROOTS, "ingested_at", CLOCK_SKEW)
            .where((F.col("app") == app) & (F.col("attempt") == 1))
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

        messages = (
            self._overdue_roots(app)
            .where(F.col("attempt") == 1)
            .select("origin_root_id")
            .distinct()
        )
        states = self._states(CLOCK_SKEW).where(F.col("app") == app)
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

    def apps(self) -> list[str]:
        """The apps to check: the run's app, or every app configured, with roots
        registered, or with messages reported sent in the window."""
        if self.app is not None:
            return [self.app]
        seen = (
            self._since(ROOTS, "ingested_at")
            .select("app")
            .union(self._since(SENT_MESSAGES, "sent_at").select("app"))
            .distinct()
            .collect()
        )
        return sorted({*self.settings.apps, *(row["app"] for row in seen)})


def _distinct(frame: DataFrame, identity: tuple[str, ...], earliest: str) -> DataFrame:
    """One row per `identity` (the columns of it `frame` has: a writer that broke the
    schema is for the schema checks to report), with the `earliest` time of its copies,
    so every check sees the same row."""
    from pyspark.sql import functions as F

    keys = [c for c in identity if c in frame.columns]
    rest = [
        (F.min(c) if c == earliest else F.first(c)).alias(c) for c in frame.columns if c not in keys
    ]
    return frame.groupBy(*keys).agg(*rest).select(*frame.columns) if rest else frame.distinct()


def _seconds_between(start: str, end: str) -> Column:
    from pyspark.sql import functions as F

    return F.unix_micros(F.col(end)) / 1e6 - F.unix_micros(F.col(start)) / 1e6
