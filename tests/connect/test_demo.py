"""The word-count demo end to end through Spark Connect, every Spark step on the server:
ingest, split and count (their batches in the server's Python worker), the reconcile and
replay cycles (SQL MERGE), the replay by hand of a stuck dead letter, and the quality
checks. With drops, fails, poison and stuck messages and both queries killed mid-batch:
nothing is lost, nothing is duplicated, and the word counts are exact."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.config.demo import FaultSettings
from ackfold.demo.feed import Feed
from ackfold.demo.run import Demo
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import DEAD_LETTERS, ROOT_STATE
from ackfold.reconcile.quiet import COUNTERS
from ackfold.reconcile.reconciler import reconcile_quietly
from ackfold.replay.request import ReplayRequest
from ackfold.runs import run_quality
from ackfold.runs.reconcile import reconcile
from ackfold.runs.replayer import Replayer
from tests.conftest import JARS_DIR

# Two attempts, not the demo's five: every step runs through Connect on each cycle, and
# the cycles until the poison and the stuck message are dead-lettered set this test's
# time (the e2e tier runs the demo's own policy). Seed 4: 8 of the 60 sentences are hit
# on their first attempt, none on both, and not the stuck one on its 3rd (the replay by
# hand); checked in plain Python from `ids.hash64`.
MESSAGES = 60
MAX_ATTEMPTS = 2
FAULTS = FaultSettings(
    seed=4, drop={"split": 0.05}, fail={"split": 0.03}, poison=2, stuck=1, kill=("split", "count")
)


def test_the_demo_with_faults_through_connect_loses_nothing_and_counts_exactly(
    spark: SparkSession, connect_url: str, sqs_server: Any, tmp_path: Path
) -> None:
    settings = load_settings(
        var_dir=tmp_path / "var", jars_dir=JARS_DIR, spark={"remote": connect_url},
        sqs={"endpoint_url": sqs_server.endpoint_url, "wait_time": "1s"},
        apps={"wordcount": {"source_queue": f"connect-{uuid.uuid4().hex[:8]}",
                            "max_attempts": MAX_ATTEMPTS}},
    )  # fmt: skip
    printed: list[str] = []
    demo = Demo(spark, settings, messages=MESSAGES, faults=FAULTS, say=printed.append)
    report = demo.run()
    assert report.sent == report.registered == MESSAGES
    assert report.lost == 0, report.lost_seqs
    assert report.duplicates == 0
    assert report.dead_lettered_seqs == demo.feed.dead_letters, "the poison and the stuck"
    assert report.words_exact, report.word_mismatches
    assert report.completed_after_replay > 0, "the faults happened and replays repaired them"
    assert report.queries_restarted == 2, "both queries were killed once and restarted"
    assert demo.app.max_attempts == MAX_ATTEMPTS

    # The stuck message, replayed by hand past max attempts, completes.
    root = demo.app.ledger.root
    dead = spark.read.format("delta").load(f"{root}/{DEAD_LETTERS}").collect()
    stuck = [r["root_id"] for r in dead if "injected outage" in r["reason"]]
    assert len(stuck) == 1
    replayer = Replayer(spark, demo.settings)
    request = ReplayRequest(root_ids=tuple(stuck), statuses=(status.DEAD_LETTERED,))
    assert replayer.execute(replayer.plan(request)).sent == 1
    demo.app.step()
    now = datetime.now(UTC)
    summary = reconcile(spark, demo.settings, app="wordcount", now=now)
    # Its mark says what the server's stream read: the next run at the same time, with
    # nothing new, needs no Spark job, and says what a Spark run would.
    quiet = reconcile_quietly(demo.settings, app="wordcount", now=now)
    assert summary.pop("engine") == "spark"
    assert quiet == {**summary, **dict.fromkeys(COUNTERS, 0)}
    states = spark.read.format("delta").load(f"{root}/{ROOT_STATE}")
    origin = next(r["origin_root_id"] for r in dead if r["root_id"] == stuck[0])
    again = states.where(f"origin_root_id = {origin} AND status = 'completed'").collect()
    assert [r["attempt"] for r in again] == [demo.app.max_attempts + 1]
    everything = Feed.build(MESSAGES, FAULTS.model_copy(update={"stuck": 0}))
    counted = spark.read.format("delta").load(demo.app.counted_path).count()
    assert counted == sum(everything.true_counts().values())

    # The quality checks run through Connect too, and pass an hour on.
    checked = run_quality(demo.settings, spark=spark, now=datetime.now(UTC) + timedelta(hours=1))
    assert checked.passed, checked.violation_message()
