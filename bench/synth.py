"""A synthetic ledger, written by Spark through the real tables, for benchmarks and scale tests
(not part of the library: bench/ scripts import it as `synth`, beside `arrow_ledger`).

Each root is a complete `fanout`-ary tuple tree of `depth` levels below its spout tuple:
node j's children are nodes `fanout*j+1 .. fanout*j+fanout`. The spout writes the init
event; every node is acked by its consumer in one row that also carries its children's
edges (invariant 2), so a healthy tree XORs to 0. A fraction of roots fail at a leaf, a
fraction lose one ack (they time out), and a fraction of events are late: stamped and
appended after the others.

`Shape` is the shape alone: `Synthetic` writes it with Spark, `arrow_ledger.ArrowLedger`
with numpy and delta-rs.

Example:
    >>> Synthetic(roots=1000, fanout=2, depth=2).events_per_root
    8
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ackfold.ledger.schema.contract import ACK, FAIL, INIT
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.ledger.setup.create import create_tables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Shape:
    """The shape of a synthetic ledger. Roots `first_root .. first_root+roots-1`, one
    started per millisecond from `start`."""

    roots: int
    fanout: int = 2
    depth: int = 2
    fail_rate: float = 0.01
    missing_rate: float = 0.01
    app: str = "synthetic"
    first_root: int = 0
    start: datetime = EPOCH
    seed: int = 7

    @property
    def nodes(self) -> int:
        """Tuples per tree, the spout tuple included."""
        return sum(self.fanout**level for level in range(self.depth + 1))

    @property
    def events_per_root(self) -> int:
        return self.nodes + 1  # one ack per tuple, plus the init

    @property
    def events(self) -> int:
        return self.roots * self.events_per_root

    @property
    def end(self) -> datetime:
        """When the last root of this ledger started."""
        return self.start + timedelta(milliseconds=self.first_root + self.roots)


@dataclass(frozen=True)
class Synthetic(Shape):
    """A `Shape` written by Spark, with a fraction `late_rate` of its acks and fails
    appended in a later commit."""

    late_rate: float = 0.0

    def event_frame(self, spark: SparkSession) -> DataFrame:
        """Every event of every root, as `ack_events` rows (with a `late` flag column)."""
        from pyspark.sql import functions as F

        nodes, fanout = self.nodes, self.fanout
        root = spark.range(self.first_root, self.first_root + self.roots).select(
            F.col("id").alias("n"),
            F.xxhash64(F.lit("synthetic-root"), F.lit(self.app), F.col("id")).alias("root_id"),
            (F.lit(self.start) + F.make_interval(secs=F.col("id") / F.lit(1000.0))).alias("t0"),
            F.rand(self.seed).alias("fate"),
        )
        node = F.col("node")
        edge = F.xxhash64(F.col("root_id"), node)
        children = F.sequence(node * fanout + 1, F.least(node * fanout + fanout, F.lit(nodes - 1)))
        child_edges = F.aggregate(
            F.transform(
                F.when(node * fanout + 1 < nodes, children).otherwise(F.array().cast("array<int>")),
                lambda c: F.xxhash64(F.col("root_id"), c),
            ),
            F.lit(0).cast("bigint"),
            lambda acc, x: acc.bitwiseXOR(x),
        )
        last_leaf = F.lit(nodes - 1)
        fails = F.col("fate") < self.fail_rate
        missing = (F.col("fate") >= self.fail_rate) & (
            F.col("fate") < self.fail_rate + self.missing_rate
        )
        # One explode per root, the init (node -1) first: a root's events are written
        # together and in time order, as an app appends them, so no micro-batch of the
        # reconciler meets an ack before its root's init.
        init, fail_leaf = node == -1, fails & (node == last_leaf)
        events = (
            root.select("*", F.explode(F.sequence(F.lit(-1), last_leaf)).alias("node"))
            .where(~(missing & (node == last_leaf)))
            .select(
                "root_id",
                "t0",
                node,
                F.when(init, F.lit(INIT))
                .when(fail_leaf, F.lit(FAIL))
                .otherwise(F.lit(ACK))
                .alias("kind"),
                F.when(init, F.xxhash64(F.col("root_id"), F.lit(0)))
                .when(fail_leaf, F.lit(0).cast("bigint"))
                .otherwise(edge.bitwiseXOR(child_edges))
                .alias("ack_val"),
            )
        )
        stage = F.lit("spout")
        first = 0
        for level in range(self.depth + 1):  # level L holds nodes [first, first + fanout**L)
            stage = F.when(node >= first, F.lit(f"stage-{level}")).otherwise(stage)
            first += fanout**level
        late = (F.rand(self.seed + 1) < self.late_rate) & ~init  # acks and fails come late
        return events.select(
            F.md5(F.concat_ws("\x1f", F.lit(self.app), "root_id", "kind", F.col("node"))).alias(
                "event_id"
            ),
            F.lit(self.app).alias("app"),
            "root_id",
            "kind",
            "ack_val",
            stage.alias("stage"),
            (F.col("t0") + F.make_interval(secs=(F.col("node") + 1) / F.lit(100.0))).alias(
                "event_time"
            ),
            F.when(F.col("kind") == FAIL, F.lit("synthetic failure")).alias("reason"),
            late.alias("late"),
        )

    def root_frame(self, spark: SparkSession) -> DataFrame:
        from pyspark.sql import functions as F

        return spark.range(self.first_root, self.first_root + self.roots).select(
            F.xxhash64(F.lit("synthetic-root"), F.lit(self.app), F.col("id")).alias("root_id"),
            F.lit(self.app).alias("app"),
            F.lit(1).alias("attempt"),
            F.xxhash64(F.lit("synthetic-root"), F.lit(self.app), F.col("id")).alias(
                "origin_root_id"
            ),
            F.lit("synthetic").alias("source"),
            F.lit("bench").alias("source_queue"),
            F.col("id").cast("string").alias("source_message_id"),
            F.lit(None).cast("string").alias("source_position"),
            F.lit(None).cast("string").alias("payload"),
            (F.lit(self.start) + F.make_interval(secs=F.col("id") / F.lit(1000.0))).alias(
                "ingested_at"
            ),
        )

    def write(self, spark: SparkSession, ledger: Ledger) -> None:
        """Append the roots, then the on-time events, then the late ones, to `ledger`."""
        from pyspark.sql import functions as F

        from ackfold.ledger.storage.protocol import refuse_spark_commit

        refuse_spark_commit(ledger.root, ROOTS)  # Spark appends: local warehouses only
        create_tables(spark, ledger, (ACK_EVENTS, ROOTS))
        self.root_frame(spark).write.format("delta").mode("append").save(ledger.path(ROOTS))
        events = self.event_frame(spark)
        # Late events land in a later commit; with none, skip the second pass over the frame.
        for late in (False, True) if self.late_rate else (False,):
            (
                events.where(F.col("late") == late)
                .drop("late")
                .write.format("delta")
                .mode("append")
                .save(ledger.path(ACK_EVENTS))
            )
