"""The heartbeat: a listener on a classic session records each streaming query's progress
into `app_progress` with delta-rs, throttled per query, and its start and termination."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.ledger.tables import APP_PROGRESS, Ledger
from ackfold.track.heartbeat import IDLE, PROGRESS, STARTED, TERMINATED, install_heartbeat
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
        spark.streams.removeListener(beat.listener)
        beat.flush()
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
