"""The heartbeat: a listener on a classic session records each streaming query's progress
into `app_progress` with delta-rs, throttled per query, and its start and termination."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.ledger.schema.tables import APP_PROGRESS, Ledger
from ackfold.spark import get_spark
from ackfold.spark.session import APP_ENV
from ackfold.track.heartbeat import (
    IDLE,
    PROGRESS,
    STARTED,
    TERMINATED,
    install_heartbeat,
    remove_heartbeat,
)
from tests.conftest import JARS_DIR

INTERVAL = 2.0


def test_progress_is_recorded_throttled_with_start_and_end(
    spark: SparkSession, tmp_path: Path
) -> None:
    settings = load_settings(var_dir=tmp_path / "var", jars_dir=JARS_DIR)
    beat = install_heartbeat(spark, settings, "beating", interval=INTERVAL)
    try:
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 20)
            .load()
            .writeStream.format("noop")
            .queryName("beating.count")
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        # Wait (bounded) for several intervals' worth of batches, then stop the query.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (query.lastProgress or {}).get("batchId", 0) < 12:
            time.sleep(0.5)
        query.stop()
        # The termination event reaches the listener asynchronously.
        path = Ledger(settings.table_root).path(APP_PROGRESS)
        while time.monotonic() < deadline:
            if DeltaTable.is_deltatable(path):
                events = DeltaTable(path).to_pyarrow_table().column("event").to_pylist()
                if TERMINATED in events:
                    break
            time.sleep(0.5)
    finally:
        remove_heartbeat(spark, beat)
    rows = sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["recorded_at"])
    assert {r["app"] for r in rows} == {"beating"}
    assert {r["query_id"] for r in rows} == {str(query.id)}
    events = [r["event"] for r in rows]
    assert events[0] == STARTED
    assert TERMINATED in events
    beats = [r for r in rows if r["event"] in (PROGRESS, IDLE)]
    assert beats, "progress was recorded"
    progress = [r for r in beats if r["event"] == PROGRESS]
    assert progress[-1]["batch_id"] >= 1
    assert progress[-1]["query_name"] == "beating.count"
    assert progress[-1]["input_rows_per_second"] is not None
    assert progress[-1]["processed_rows_per_second"] is not None
    assert progress[-1]["batch_at"] is not None
    assert progress[-1]["source_lag"] is None, "the rate source reports no lag"
    # Throttled: one row per query per interval at most, though a batch ran every 0.5 s.
    last_batch = max(r["batch_id"] for r in progress)
    assert len(beats) < last_batch
    gaps = [
        (b["recorded_at"] - a["recorded_at"]).total_seconds() for a, b in itertools.pairwise(beats)
    ]
    assert all(gap >= INTERVAL - 0.05 for gap in gaps), gaps


def test_a_driver_its_dag_names_records_the_heartbeat_once(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An app DAG's run names its app to the driver (`ACKFOLD_APP`): the session it gets
    from `get_spark` records the app's heartbeat, and the app's own `install_heartbeat`
    on top of it adds no second listener (each event is one row)."""
    # The shared session's own Spark settings: `get_spark` changes none of them.
    spark_settings = {"master": "local[2]", "shuffle_partitions": 2}
    settings = load_settings(var_dir=tmp_path / "var", jars_dir=JARS_DIR, spark=spark_settings)
    monkeypatch.setenv(APP_ENV, "named")
    assert get_spark(settings) is spark  # as the driver of an app DAG's run makes its session
    beat = install_heartbeat(spark, settings, "named")  # the app's own call: the same one
    try:
        query = (
            spark.readStream.format("rate").load().writeStream.format("noop")
            .trigger(processingTime="200 milliseconds").start()
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (query.lastProgress or {}).get("batchId", 0) < 2:
            time.sleep(0.2)
        query.stop()
        path = Ledger(settings.table_root).path(APP_PROGRESS)
        events: list[str] = []
        while time.monotonic() < deadline and TERMINATED not in events:
            time.sleep(0.2)
            if DeltaTable.is_deltatable(path):
                events = DeltaTable(path).to_pyarrow_table().column("event").to_pylist()
    finally:
        remove_heartbeat(spark, beat)
    assert (events.count(STARTED), events.count(TERMINATED)) == (1, 1), events
    assert beat.interval == 30.0, "the default: named's max_heartbeat_age is 5 minutes"
    again = install_heartbeat(spark, settings, "named")
    try:
        assert again is not beat, "removed, the next install is a new listener"
    finally:
        remove_heartbeat(spark, again)
