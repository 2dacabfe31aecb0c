"""Ledger maintenance on real Delta tables: only long-completed roots lose their events,
the tables stay readable by delta-rs, and the reconciler carries on unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, SENT_MESSAGES, TABLES, Ledger
from ackfold.maintenance import run_maintenance
from ackfold.runs.reconcile import reconcile
from ackfold.sources.sent import record_sent
from ackfold.track.tracker import Tracker
from tests.conftest import JARS_DIR
from tests.spark.ledger_io import append, state


def _tracker(at: datetime) -> Tracker:
    clock = (at + timedelta(seconds=i) for i in range(10_000))
    return Tracker("wc", clock=lambda: next(clock))


def _complete(tracker: Tracker, message: str) -> int:
    sentence = tracker.spout(message)
    word = tracker.emit([sentence], stage="split")
    tracker.ack(sentence, stage="split")
    tracker.ack(word, stage="count")
    return sentence.roots[0]


def _write(spark: SparkSession, ledger: Ledger, tracker: Tracker) -> None:
    append(spark, ledger, ROOTS, tracker.drain_roots())
    append(spark, ledger, ACK_EVENTS, tracker.drain())


def _events_by_root(spark: SparkSession, ledger: Ledger) -> dict[int, int]:
    rows = spark.read.format("delta").load(ledger.path(ACK_EVENTS)).groupBy("root_id").count()
    return {row["root_id"]: row["count"] for row in rows.collect()}


def test_maintenance_expires_only_long_completed_roots_and_reconcile_carries_on(
    spark: SparkSession, tmp_path: Path
) -> None:
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)  # retention 30 days
    ledger = Ledger(settings.table_root)
    now = datetime.now(UTC)
    old = now - timedelta(days=40)

    # 40 days ago: one root completed, one stuck (timed out), one failed.
    tracker = _tracker(old)
    done_long_ago = _complete(tracker, "m1")
    stuck = tracker.spout("m2")
    tracker.emit([stuck], stage="split")
    tracker.ack(stuck, stage="split")
    bad = tracker.spout("m3")
    tracker.fail(bad, stage="split", reason="unparseable")
    _write(spark, ledger, tracker)
    reconcile(spark, settings, now=old + timedelta(minutes=10))
    # An hour ago: a root completed recently.
    tracker = _tracker(now - timedelta(hours=1))
    done_lately = _complete(tracker, "m4")
    _write(spark, ledger, tracker)
    reconcile(spark, settings, now=now)
    before = state(spark, ledger)
    statuses = {r: before[r]["status"] for r in (done_long_ago, stuck.roots[0], bad.roots[0])}
    assert statuses == {
        done_long_ago: "completed",
        stuck.roots[0]: "timed_out",
        bad.roots[0]: "failed",
    }
    assert before[done_lately]["status"] == "completed"
    events = _events_by_root(spark, ledger)
    # What producers sent, 40 days ago and an hour ago.
    for at, message in ((old, "sent-long-ago"), (now - timedelta(hours=1), "sent-lately")):
        record_sent(
            spark,
            ledger,
            app="wc",
            source="sqs",
            source_queue="q",
            message_ids=[message],
            sent_at=at,
        )

    codec = spark.conf.get("spark.sql.parquet.compression.codec")
    summary = run_maintenance(settings, engine="spark", spark=spark, now=now)

    # Its rewrites are in the ledger's codec (`ackfold.ledger.schema.encoding`), the session's
    # own codec is as it was.
    files = spark.read.format("delta").load(ledger.path(ACK_EVENTS)).inputFiles()
    assert files
    assert all(name.endswith(".zstd.parquet") for name in files), files
    assert spark.conf.get("spark.sql.parquet.compression.codec") == codec
    assert summary["roots_expired"] == 1
    assert summary["events_deleted"] == events[done_long_ago] == 3  # init, split, count
    assert summary["reports_deleted"] == {
        "sent_messages": 1,
        "quality_results": 0,
        "app_progress": 0,
    }
    sent = spark.read.format("delta").load(ledger.path(SENT_MESSAGES)).collect()
    assert [row["source_message_id"] for row in sent] == ["sent-lately"]
    after = _events_by_root(spark, ledger)
    assert done_long_ago not in after
    assert after == {r: n for r, n in events.items() if r != done_long_ago}
    for table in TABLES:
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{ledger.path(table)}`").first()
        assert detail is not None
        assert detail["minReaderVersion"] == 1, table
        # VACUUM's retention comes from this property in Delta 4 (its RETAIN is ignored).
        retention = detail["properties"]["delta.deletedFileRetentionDuration"]
        assert retention == "interval 168 hours", table
    history = spark.sql(f"DESCRIBE HISTORY delta.`{ledger.path(ACK_EVENTS)}`").collect()
    operations = [row["operation"] for row in history]
    assert "MERGE" in operations, "the retention delete"
    assert "OPTIMIZE" in operations
    (zorder,) = [r for r in history if r["operation"] == "OPTIMIZE"]
    assert "root_id" in zorder["operationParameters"]["zOrderBy"]

    # The reconciler's stream passes the delete commit: a new root is folded and no
    # status moves.
    tracker = _tracker(now)
    new_root = _complete(tracker, "m5")
    _write(spark, ledger, tracker)
    summary = reconcile(spark, settings, now=now + timedelta(seconds=30))
    assert summary["events_read"] > 0
    again = state(spark, ledger)
    assert again[new_root]["status"] == "completed"
    folded = ("status", "xor_acc", "event_count")
    assert {r: [again[r][c] for c in folded] for r in before} == {
        r: [before[r][c] for c in folded] for r in before
    }, "the deleted events are not folded again, nor missed"
