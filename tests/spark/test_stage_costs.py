"""What a tracked step costs Spark, asserted where it can be: the step's code is compiled
once, not every micro-batch (issue 56). Spark counts its code generations
(``CodegenMetrics``); a time that changes per batch inside the job (``current_timestamp()``
becomes a new literal each query) made every batch's code new, and compiled it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackfold.track import folding
from ackfold.track.stage import StageTracker

APP = "costs"


def compilations(spark: SparkSession) -> Callable[[], int]:
    """How many times this JVM's Spark has compiled generated code so far."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    metric = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    return lambda: int(metric.getCount())


@contextmanager
def generated_code(spark: SparkSession) -> Iterator[None]:
    """Spark's default, code generation, for a while: the spark tier runs interpreted
    (``tests/conftest.py``), and only generated code is compiled."""
    conf = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def batch_events(spark: SparkSession) -> list[DataFrame]:
    """The events of one micro-batch of a split, built afresh as ``foreachBatch`` does:
    the spout's inits, the split's compact acks from the arrays, and its fails. The same
    rows every time: a range's bounds are in its generated code."""
    # Not a local relation: Spark would evaluate that on the driver, without generated code.
    lines = spark.range(20).select(
        F.concat(F.lit("m-"), F.col("id").cast("string")).alias("id"),
        F.when(F.col("id") % 5 != 0, F.lit("a b c")).alias("text"),
    )
    spout = StageTracker(APP, "spout").spout(lines, message_id="id", source="test", to=["split"])
    split = StageTracker(APP, "split")
    good = spout.tuples.where(F.col("text").isNotNull())
    return [
        spout.events,
        split.ack(good, exploded=F.split("text", " ")),
        split.fail(spout.tuples.where(F.col("text").isNull()), "no text"),
    ]


def test_a_steps_events_compile_once_and_carry_the_drivers_time(spark: SparkSession) -> None:
    count = compilations(spark)
    with generated_code(spark):
        folding.collect(batch_events(spark))  # the first batch compiles the step's code
        before = count()
        start = datetime.now(UTC)
        rows = folding.collect(batch_events(spark))
        end = datetime.now(UTC)
        assert count() == before, f"the second batch compiled {count() - before} classes"
    # One time for the whole batch, the driver's, read while it collected.
    (stamp,) = set(rows.column("event_time").to_pylist())
    assert start <= stamp <= end
    assert sorted(set(rows.column("kind").to_pylist())) == ["ack", "fail", "init"]


def test_collect_stamps_the_time_it_is_given(spark: SparkSession) -> None:
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    rows = folding.collect(batch_events(spark), now=at)
    assert set(rows.column("event_time").to_pylist()) == {at}
    assert rows.num_rows == 20 + 16 + 4  # inits; one compact ack per good root; fails
