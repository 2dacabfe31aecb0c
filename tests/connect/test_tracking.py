"""The tracking API through Spark Connect: the classic tier's tracking tests, unchanged, on
a Connect session (every verb: spout, registered, emit, explode, aggregate, a join, ack,
fail, write_batch, explode_acked); a re-run micro-batch of a real query writes no output
twice; and the README's example. A Connect session raises on anything that needs a JVM
(`sparkContext`, `_jvm`, RDDs), so these passing shows the tracking path needs none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackfold.config import Settings
from ackfold.ledger.schema import schemes
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.spark import is_connect, start_query
from ackfold.track.stage import StageTracker
from tests.conftest import PROJECT_DIR
from tests.docs.test_examples import blocks
from tests.spark import test_one_pass as classic_one_pass
from tests.spark.test_one_pass import test_one_pass_folds_like_the_reference_tracker
from tests.spark.test_tracking import (
    APP,
    read,
    test_a_parent_anchored_twice_and_a_diamond_match_tracker,
    test_a_replayed_attempt_registers_the_tracker_root,
    test_a_rerun_batch_writes_its_outputs_once_and_changes_no_status,
    test_aggregate_and_join_across_roots_match_tracker,
    test_spark_ids_equal_the_python_ids,
    test_streaming_word_count_writes_the_tracker_events,
    version,
)

# Collected here too, with this tier's `spark`: a Spark Connect session.
__all__ = [
    "test_a_parent_anchored_twice_and_a_diamond_match_tracker",
    "test_a_replayed_attempt_registers_the_tracker_root",
    "test_a_rerun_batch_writes_its_outputs_once_and_changes_no_status",
    "test_aggregate_and_join_across_roots_match_tracker",
    "test_one_pass_folds_like_the_reference_tracker",
    "test_spark_ids_equal_the_python_ids",
    "test_streaming_word_count_writes_the_tracker_events",
]


@pytest.mark.parametrize(
    ("acks", "scheme"), [("compact", schemes.TEXT), ("per_tuple", schemes.NUMERIC)]
)
def test_one_pass_writes_the_events_of_two_passes(
    spark: SparkSession, tmp_path: Path, acks: str, scheme: int
) -> None:
    """The classic tier's test through Connect, each ack mode and each id scheme once: the
    ack mode changes only what the driver makes of the observed metrics, the scheme only
    how the spout derives the root ids before the one pass, so no pair of them takes a
    path of its own. The four pairs are the classic tier's (`tests/spark/test_one_pass.py`);
    two more runs here cost about 20 CPU-seconds."""
    classic_one_pass.test_one_pass_writes_the_events_of_two_passes(spark, tmp_path, scheme, acks)


def test_the_session_is_a_connect_client_with_no_jvm(spark: SparkSession) -> None:
    assert is_connect(spark)
    with pytest.raises(Exception, match="JVM_ATTRIBUTE_NOT_SUPPORTED"):
        _ = spark.sparkContext


def test_a_batch_rerun_by_its_query_writes_no_output_twice(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The query dies after its batch committed and before its checkpoint did (a marker
    file says so: the batch runs on the server, in a copy of this function); restarted,
    it runs batch 0 again: its output gets no commit (the query's transaction id, found
    under Connect too), and the ledger gets exact copies of its rows, nothing else."""
    source, marker = tmp_path / "in", tmp_path / "crashed-once"
    source.mkdir()
    (source / "a.json").write_text('{"id": "m-1", "text": "a b"}\n{"id": "m-2", "text": "c"}\n')
    ledger = Ledger(str(tmp_path / "ledger"))
    words_path = str(tmp_path / "words")
    spout = StageTracker(APP, "spout", ledger=ledger)
    split = StageTracker(APP, "split", ledger=ledger, query="rerun")

    def split_batch(batch: DataFrame, batch_id: int) -> None:
        lines = spout.spout(batch, message_id="id", source="test")
        words = split.explode(lines.tuples, F.split("text", " "), "word").select("word", "_ackfold")
        split.write_batch(
            batch_id,
            outputs={words_path: words},
            roots=lines.roots,
            events=[lines.events, split.ack(lines.tuples, words)],
        )
        if not marker.exists():
            marker.write_text(str(batch_id))
            raise RuntimeError("killed after the batch's commits, before its checkpoint's")

    def run() -> None:
        writer = (
            spark.readStream.schema("id string, text string").json(str(source))
            .writeStream.queryName("rerun").foreachBatch(split_batch)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
        )  # fmt: skip
        start_query(writer).awaitTermination()

    tables = [words_path, ledger.path(ROOTS), ledger.path(ACK_EVENTS)]
    with pytest.raises(Exception, match="killed after the batch's commits"):
        run()
    versions = [version(path) for path in tables]
    counts = [len(read(spark, path)) for path in tables]
    assert counts == [3, 2, 4]  # 3 words; 2 roots; 2 inits and 2 acks
    first = [read(spark, path) for path in tables]
    run()  # batch 0 again, from the checkpoint
    assert marker.read_text() == "0"
    assert version(words_path) == versions[0]
    again = [read(spark, path) for path in tables]
    assert [len(rows) for rows in again] == [3, 4, 8]
    for before, after in zip(first[1:], again[1:], strict=True):
        assert sorted(map(copy, after)) == sorted(map(copy, before * 2))
    # Spark committed the ledger's rows (Connect, a local warehouse) in the ledger's
    # codec (`ackfold.ledger.schema.encoding`); the app's own output keeps the session's.
    for table in tables[1:]:
        names = [path.name for path in Path(table).glob("*.parquet")]
        assert names
        assert all(name.endswith(".zstd.parquet") for name in names), names
    assert not list(Path(words_path).glob("*.zstd.parquet"))


def copy(row: Any) -> tuple[Any, ...]:
    """A ledger row without the time it was written: what a copy of it repeats."""
    return tuple(v for k, v in row.asDict().items() if k not in ("event_time", "ingested_at"))


def test_the_readme_example_runs_through_connect(
    connect_settings: Settings, tmp_path: Path
) -> None:
    """The README's "Track your own app", as a user runs it with ACKFOLD_SPARK__REMOTE."""
    readme = PROJECT_DIR / "README.md"
    example = next(b for b in blocks(readme) if "StageTracker" in b.code and b.lang == "python")
    script = tmp_path / "example.py"
    script.write_text(example.code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACKFOLD_")}
    env.update(
        ACKFOLD_SPARK__REMOTE=str(connect_settings.spark.remote),
        ACKFOLD_VAR_DIR=str(tmp_path / "var"),
        ACKFOLD_JARS_DIR=str(connect_settings.jars_dir),
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if "Error" in line or "Exception" in line]
    assert done.returncode == 0, "\n".join(errors[:20]) + done.stderr[-1500:]
    assert done.stdout.strip().splitlines()[-1] == "{'completed': 1, 'failed': 1}"
