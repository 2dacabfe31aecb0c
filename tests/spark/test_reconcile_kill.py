"""A reconcile killed in the middle of its MERGE converges, on re-run, to an uninterrupted run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ackfold.config import load_settings
from ackfold.jobs import APPS_DIR
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, ROOTS, Ledger
from ackfold.ledger.setup.create import create_tables
from ackfold.runs.reconcile import reconcile
from tests.conftest import JARS_DIR
from tests.spark.ledger_io import state

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=10)
ROOT_COUNT = 40_000


def _synthetic_ledger(spark: SparkSession, ledger: Ledger) -> None:
    """ROOT_COUNT roots of 3 events each (init, ack, ack); every 7th root misses its last ack."""
    create_tables(spark, ledger)
    roots = spark.range(ROOT_COUNT).select(
        (F.col("id") * 7919 + 1).alias("root_id"), F.col("id").alias("n")
    )
    child = F.xxhash64(F.lit("child"), F.col("root_id"))
    seed = F.xxhash64(F.lit("seed"), F.col("root_id"))
    rows = [
        ("init", seed, "spout", 0),
        ("ack", seed.bitwiseXOR(child), "split", 1),
        ("ack", child, "count", 2),
    ]
    events = None
    for kind, val, stage, offset in rows:
        frame = roots.select(
            F.concat_ws("-", F.col("root_id"), F.lit(stage)).alias("event_id"),
            F.lit("synthetic").alias("app"),
            "root_id",
            F.lit(kind).alias("kind"),
            val.alias("ack_val"),
            F.lit(stage).alias("stage"),
            (F.lit(T0) + F.make_interval(secs=F.lit(offset))).alias("event_time"),
            F.lit(None).cast("string").alias("reason"),
        )
        if stage == "count":
            frame = frame.join(roots.where(F.col("n") % 7 != 0).select("root_id"), "root_id")
        events = frame if events is None else events.unionByName(frame)
    assert events is not None
    events.write.format("delta").mode("append").save(ledger.path(ACK_EVENTS))


def _data_files(table: Path) -> set[str]:
    return {str(p) for p in table.rglob("*.parquet")}


def _log_versions(table: Path) -> int:
    return len(list((table / "_delta_log").glob("*.json")))


def test_killed_mid_merge_then_rerun_equals_an_uninterrupted_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    killed_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"
    killed = load_settings(var_dir=killed_dir, jars_dir=JARS_DIR)
    _synthetic_ledger(spark, Ledger(killed.table_root))
    for table in (ACK_EVENTS, ROOTS):
        shutil.copytree(killed_dir / "warehouse" / table, clean_dir / "warehouse" / table)
    clean = load_settings(var_dir=clean_dir, jars_dir=JARS_DIR)
    create_tables(spark, Ledger(killed.table_root))
    root_state = killed_dir / "warehouse" / ROOT_STATE
    versions_before = _log_versions(root_state)

    env = {**os.environ, "ACKFOLD_VAR_DIR": str(killed_dir), "ACKFOLD_JARS_DIR": str(JARS_DIR)}
    argv = [
        sys.executable,
        str(APPS_DIR / "reconcile.py"),
        "--now",
        NOW.isoformat(),
    ]
    proc = subprocess.Popen(
        argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        # The MERGE writes its data files first and commits last: kill between the two.
        deadline = time.monotonic() + 600
        while not _data_files(root_state) and time.monotonic() < deadline:
            assert proc.poll() is None, "reconcile finished before its MERGE was caught"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert _data_files(root_state), "the MERGE never started writing"
    # The run claimed root_state first (a commit of its lease's epoch, no data).
    assert _log_versions(root_state) == versions_before + 1
    assert not DeltaTable(str(root_state)).file_uris(), "the MERGE committed before the kill"

    rerun = reconcile(spark, killed, now=NOW)
    uninterrupted = reconcile(spark, clean, now=NOW)
    assert (
        rerun["by_status"]
        == uninterrupted["by_status"]
        == {
            "completed": ROOT_COUNT - len(range(0, ROOT_COUNT, 7)),
            "timed_out": len(range(0, ROOT_COUNT, 7)),
        }
    )

    def strip(rows: dict[int, dict[str, object]]) -> dict[int, dict[str, object]]:
        return {
            k: {c: v for c, v in row.items() if c not in ("seen_event_hashes",)}
            for k, row in rows.items()
        }

    killed_state = state(spark, Ledger(killed.table_root))
    clean_state = state(spark, Ledger(clean.table_root))
    assert strip(killed_state) == strip(clean_state)
    assert {k: sorted(v["seen_event_hashes"]) for k, v in killed_state.items()} == {
        k: sorted(v["seen_event_hashes"]) for k, v in clean_state.items()
    }
