"""The CLI end to end on a ledger Spark wrote: reconcile (JVM), then roots and show (no JVM).
Spark's own warnings stay out of the output unless `--verbose`."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.ledger.commits.marks import read_mark
from ackfold.ledger.schema.ids import format_id
from ackfold.ledger.schema.tables import ACK_EVENTS, Ledger
from ackfold.track.tracker import Tracker
from tests.conftest import JARS_DIR, PROJECT_DIR
from tests.spark.ledger_io import append
from tests.spark_output import spark_warnings

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
ACKFOLD = str(PROJECT_DIR / ".venv" / "bin" / "ackfold")


def _ackfold(var: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The Spark engine's CLI (its stream checkpoint remembers what a removed mark forgets);
    # the embedded engine's is tests/conformance's and tests/s3's.
    env = {
        **os.environ,
        "ACKFOLD_VAR_DIR": str(var),
        "ACKFOLD_JARS_DIR": str(JARS_DIR),
        "ACKFOLD_ENGINE__KIND": "spark",
    }
    return subprocess.run([ACKFOLD, *args], env=env, capture_output=True, text=True, timeout=600)


def test_reconcile_then_list_and_show_through_the_cli(spark: SparkSession, tmp_path: Path) -> None:
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    ledger = Ledger(settings.table_root)
    ticks = (T0 + timedelta(seconds=i) for i in itertools.count())
    tracker = Tracker("wordcount", clock=ticks.__next__)
    ok = tracker.spout("m1", source="sqs", source_queue="sentences", payload="the storm")
    word = tracker.emit([ok], stage="split")
    tracker.ack(ok, stage="split")
    tracker.ack(word, stage="count")
    bad = tracker.spout("m2", source="sqs", source_queue="sentences", payload="x" * 500)
    tracker.fail(bad, stage="split", reason="no words")
    append(spark, ledger, "roots", tracker.drain_roots())
    append(spark, ledger, "ack_events", tracker.drain())

    done = _ackfold(tmp_path, "reconcile", "--now", "2026-11-22T10:05:00Z")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["by_status"] == {"completed": 1, "failed": 1}
    assert spark_warnings(done.stderr) == [], done.stderr[-2000:]
    # Again, verbose: nothing new and no timeout due, so no Spark at all, and it says so.
    again = _ackfold(tmp_path, "reconcile", "--now", "2026-11-22T10:05:00Z", "--verbose")
    assert again.returncode == 0, again.stderr[-2000:]
    quiet = json.loads(again.stdout)
    assert (quiet["by_status"], quiet["events_read"]) == (summary["by_status"], 0)
    assert "nothing to write, so no Spark job ran" in again.stderr, again.stderr[-2000:]
    # A commit to ack_events since (of no row), the same run is a Spark run: verbose,
    # Spark's warnings are back.
    events = DeltaTable(ledger.path(ACK_EVENTS))
    events.create_write_transaction([], mode="append", schema=events.schema())
    spark_run = _ackfold(tmp_path, "reconcile", "--now", "2026-11-22T10:05:00Z", "--verbose")
    assert spark_run.returncode == 0, spark_run.stderr[-2000:]
    again_on_spark = json.loads(spark_run.stdout)
    assert (quiet["engine"], again_on_spark.pop("engine")) == ("quiet", "spark")
    assert again_on_spark == {k: v for k, v in quiet.items() if k != "engine"}
    assert spark_warnings(spark_run.stderr), spark_run.stderr[-2000:]
    folded = read_mark(ledger, None, str(events.metadata().id))
    assert folded == events.version() + 1, "the Spark run marks what it read"

    listed = _ackfold(tmp_path, "roots", "--status", "failed", "--json")
    assert listed.returncode == 0, listed.stderr
    (failed,) = json.loads(listed.stdout)
    assert (failed["root_id"], failed["fail_reason"]) == (format_id(bad.roots[0]), "no words")

    shown = _ackfold(tmp_path, "show", str(bad.roots[0]))
    assert shown.returncode == 0, shown.stderr
    assert "failed" in shown.stdout
    assert "no words" in shown.stdout
    assert "x" * 201 not in shown.stdout, "the payload preview must be capped"

    unknown = _ackfold(tmp_path, "reconcile", "--app", "nope")
    assert unknown.returncode == 1
    assert "unknown app 'nope'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
