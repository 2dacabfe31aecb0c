"""What a running SQS app does when `roots`, which it reads as a Delta stream, gains a
column during an upgrade (docs/operations/upgrading.md): the stream stops with Delta's
schema-change error, and started again on the same checkpoint it carries on, every
registered root read once, the ones before the change and after it alike."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import ROOTS, Ledger
from ackfold.track.stage import StageTracker
from ackfold.track.tracker import Tracker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

APP = "orders"


def _register(ledger: Ledger, names: list[str]) -> None:
    tracker = Tracker(APP)
    for name in names:
        tracker.spout(name, source="sqs", source_queue="q")
    LedgerWriter(ledger.root).append(tracker.drain_roots(), tracker.drain())


def test_a_stream_of_roots_stops_once_when_roots_gains_a_column_and_carries_on(
    spark: SparkSession, tmp_path: Path
) -> None:
    ledger = Ledger(str(tmp_path / "ledger"))
    out, checkpoint = str(tmp_path / "first_tuples"), str(tmp_path / "checkpoint")
    _register(ledger, ["m-1", "m-2"])

    def start() -> StreamingQuery:
        roots = spark.readStream.format("delta").load(ledger.path(ROOTS))
        first = StageTracker(APP, "spout").registered(roots).select("source_message_id")
        return (
            first.writeStream.format("delta")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second")
            .start(out)
        )

    query = start()
    query.processAllAvailable()
    # A producer outside Spark appends a root with a column `roots` did not have.
    tracker = Tracker(APP)
    tracker.spout("m-3", source="sqs", source_queue="q")
    schema = pa.schema(DeltaTable(ledger.path(ROOTS)).schema().to_arrow())
    rows = [{**r, "note": "from a newer producer"} for r in tracker.drain_roots()]
    with_note = schema.append(pa.field("note", pa.string()))
    write_deltalake(
        ledger.path(ROOTS),
        pa.Table.from_pylist(rows, schema=with_note),
        mode="append",
        schema_mode="merge",
    )
    LedgerWriter(ledger.root).append((), tracker.drain())
    _register(ledger, ["m-4"])
    with pytest.raises(Exception, match="DELTA_SCHEMA_CHANGED"):
        query.awaitTermination(120)
    query.stop()

    again = start()  # what Airflow's retry of a continuous app does
    again.processAllAvailable()
    again.stop()
    read = [r.source_message_id for r in spark.read.format("delta").load(out).collect()]
    assert sorted(read) == ["m-1", "m-2", "m-3", "m-4"]
