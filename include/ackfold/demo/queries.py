"""Running the word count's streaming queries (`ackfold.demo.wordcount`): a stage's query
started on its checkpoint, and run to the end of its input, restarted from its checkpoint
when the demo's faults kill it mid-batch (`ackfold.demo.faults`), with Spark's stack
trace of that expected kill silenced: the demo reports the kill itself, in one line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from ackfold.demo.faults import InjectedKill, Killer
from ackfold.sources.kafka_spout import restart_gets_past
from ackfold.spark import is_connect, start_query

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger("ackfold.demo")

MAX_RESTARTS: Final = 3


def start_stage(
    source: DataFrame, *, name: str, batch: Any, checkpoint: str, trigger: dict[str, Any]
) -> StreamingQuery:
    """A stage's query: `batch` on each micro-batch of `source`, from `checkpoint`."""
    writer = (
        source.writeStream.queryName(name)
        .foreachBatch(batch)
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger)
    )
    return start_query(writer)


def run_to_end(
    spark: SparkSession,
    app: str,
    stage: str,
    start: Callable[[], StreamingQuery],
    killer: Killer,
) -> int:
    """Run the query `start` starts (on `availableNow`) to the end of its input,
    restarting it after an injected kill or SPARK-55271, at most `MAX_RESTARTS` times.
    Returns the restarts after a kill."""
    from pyspark.errors import StreamingQueryException

    restarts = 0
    for attempt in range(MAX_RESTARTS + 1):
        query = start()
        try:
            with quiet_streaming_errors(spark, stage in killer.pending):
                query.awaitTermination()
            break
        except StreamingQueryException as exc:
            if attempt == MAX_RESTARTS:
                raise
            if restart_gets_past(exc):
                log.info("%s: query %s hit SPARK-55271; restarting it", app, stage)
                continue
            if InjectedKill.__name__ not in str(exc):
                raise
            # Under Spark Connect the batch ran on the server, on a copy of the
            # killer: this one learns of the kill here, so the restart runs on.
            killer.killed_once(stage)
            restarts += 1
            log.warning("%s: query %s killed mid-batch; restarting it", app, stage)
    return restarts


@contextmanager
def quiet_streaming_errors(spark: SparkSession, quiet: bool) -> Iterator[None]:
    """Silence Spark's stack trace of a query the faults are about to kill: the demo
    reports the kill itself, in one line. Any other error is logged as usual."""
    if not quiet or is_connect(spark):  # a Connect server's log is the server's own
        yield
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    configurator = jvm.org.apache.logging.log4j.core.config.Configurator
    level = jvm.org.apache.logging.log4j.Level
    logger = "org.apache.spark.sql.execution.streaming"
    proxy_log = logging.getLogger("py4j.clientserver")  # logs the Python side's traceback
    previous = proxy_log.level
    jvm_previous = jvm.org.apache.logging.log4j.LogManager.getLogger(logger).getLevel()
    configurator.setLevel(logger, level.OFF)
    proxy_log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        configurator.setLevel(logger, jvm_previous)
        proxy_log.setLevel(previous)
