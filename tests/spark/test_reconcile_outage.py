"""No root is stranded by a reconciler that was away for longer than `reconcile.lookback`,
and a root keeps exactly one `root_state` row whatever of it arrives again later.

A root in flight when the reconciler stops times out when it comes back, the automatic
replay selects it, and the quality checks fail until it is replayed; before the
reconciler is back, they fail as well. Tried 3 and 30 days after the root started (the
lookback is 2 days)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ackfold.config import Settings, load_settings
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, ROOTS, Ledger
from ackfold.ledger.schema.values import hex64
from ackfold.replay.request import ReplayRequest
from ackfold.runs import run_quality
from ackfold.runs.reconcile import reconcile
from ackfold.runs.replayer import Replayer
from ackfold.track.tracker import Tracker
from ackfold.track.tuples import Tuple
from tests.conftest import JARS_DIR
from tests.spark.ledger_io import append, state

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
APP = "orders"  # no policy of its own: the 5-minute default timeout


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(var_dir=tmp_path, jars_dir=JARS_DIR, defaults={"timeout": "5m"})


def _spout(tracker: Tracker, message: str) -> Tuple:
    return tracker.spout(message, source="sqs", source_queue="in", payload=f"body of {message}")


def _rows(spark: SparkSession, ledger: Ledger, root: int) -> list[dict[str, object]]:
    frame = spark.read.format("delta").load(ledger.path(ROOT_STATE))
    return [row.asDict() for row in frame.where(frame.root_id == root).collect()]


def _utc(at: datetime) -> datetime:
    """A timestamp Spark collected (naive, in the session's UTC) as an aware one."""
    return at.replace(tzinfo=UTC)


def _lost(report) -> list[str]:  # type: ignore[no-untyped-def]
    (check,) = [r for r in report.results if r.check == "no_lost_roots"]
    return [] if check.success else list(check.sample)


@pytest.mark.parametrize("away", [timedelta(days=3), timedelta(days=30)], ids=["3d", "30d"])
def test_a_root_in_flight_when_the_reconciler_stops_times_out_when_it_returns(
    spark: SparkSession, settings: Settings, away: timedelta
) -> None:
    ledger = Ledger(settings.table_root)
    tracker = Tracker(APP, clock=lambda: T0)
    stuck = _spout(tracker, "m1")
    tracker.emit([stuck], stage="split")  # a word no stage ever acks
    tracker.ack(stuck, stage="split")
    done = _spout(tracker, "m2")
    tracker.ack(done, stage="split")
    append(spark, ledger, ROOTS, tracker.drain_roots())
    append(spark, ledger, ACK_EVENTS, tracker.drain())
    reconcile(spark, settings, now=T0 + timedelta(minutes=1))
    (root,) = stuck.roots
    assert [r["status"] for r in _rows(spark, ledger, root)] == [status.PENDING]

    back = T0 + away
    # The reconciler is still away: the quality checks see the root, however old.
    lost = _lost(run_quality(settings, spark=spark, now=back, app=APP))
    assert lost == [f"root_id={hex64(root)}, outcome=pending past its timeout"]

    summary = reconcile(spark, settings, now=back)
    (row,) = _rows(spark, ledger, root)
    assert (row["status"], _utc(row["status_changed_at"])) == (status.TIMED_OUT, back)
    assert summary["by_status"] == {status.COMPLETED: 1, status.TIMED_OUT: 1}

    # Timed out days after it was due: no replay backoff is owed any more.
    lost = _lost(run_quality(settings, spark=spark, now=back, app=APP))
    assert lost == [f"root_id={hex64(root)}, outcome=timed out, and not replayed"]
    replayer = Replayer(spark, settings, now=back + timedelta(minutes=1))
    try:
        plan = replayer.plan(ReplayRequest(automatic=True, requested_by="test"))
    finally:
        replayer.close()
    assert [p.root_id for p in plan.sends] == [root]


def test_events_of_a_root_older_than_the_lookback_fold_into_its_one_row(
    spark: SparkSession, settings: Settings
) -> None:
    """A pending root's message delivered again 3 days on (a new init, same id, new time),
    then processed to the end: one row, completed. An exact copy of a completed root's init
    appended 3 days on: one row, still completed, the copy dropped."""
    ledger = Ledger(settings.table_root)
    at = [T0]
    tracker = Tracker(APP, clock=lambda: at[0])
    again = _spout(tracker, "again")
    settled = _spout(tracker, "settled")
    tracker.ack(settled, stage="split")
    events = tracker.drain()
    append(spark, ledger, ROOTS, tracker.drain_roots())
    append(spark, ledger, ACK_EVENTS, events)
    reconcile(spark, settings, now=T0 + timedelta(minutes=1))

    at[0] = later = T0 + timedelta(days=3)
    (init,) = [e for e in events if e["root_id"] == again.roots[0]]
    tracker.ack(again, stage="split")
    copy = next(e for e in events if e["root_id"] == settled.roots[0] and e["kind"] == "init")
    append(spark, ledger, ACK_EVENTS, [{**init, "event_time": later}, *tracker.drain(), copy])
    summary = reconcile(spark, settings, now=later + timedelta(minutes=1))

    for tuple_, count in ((again, 2), (settled, 2)):
        (row,) = _rows(spark, ledger, tuple_.roots[0])
        assert (row["status"], row["event_count"]) == (status.COMPLETED, count)
        assert _utc(row["first_event_at"]) == T0
    assert summary["duplicates_dropped"] == 2
    assert len(state(spark, ledger)) == 2


def test_roots_registered_while_the_reconciler_was_away_get_a_row_and_time_out(
    spark: SparkSession, settings: Settings
) -> None:
    """Roots that started during a 5-day outage, older than the lookback when the
    reconciler returns: each gets its row (none is parked for want of a window), the
    unfinished one times out, the finished one completes."""
    ledger = Ledger(settings.table_root)
    at = [T0]
    tracker = Tracker(APP, clock=lambda: at[0])
    reconcile(spark, settings, now=T0)  # an empty ledger, reconciled before the outage
    at[0] = T0 + timedelta(days=1)
    unfinished = _spout(tracker, "during-1")
    tracker.emit([unfinished], stage="split")
    tracker.ack(unfinished, stage="split")
    finished = _spout(tracker, "during-2")
    tracker.ack(finished, stage="split")
    append(spark, ledger, ROOTS, tracker.drain_roots())
    append(spark, ledger, ACK_EVENTS, tracker.drain())

    summary = reconcile(spark, settings, now=T0 + timedelta(days=5))
    assert summary["unmatched_events"] == 0
    statuses = {r: row["status"] for r, row in state(spark, ledger).items()}
    assert statuses == {
        unfinished.roots[0]: status.TIMED_OUT,
        finished.roots[0]: status.COMPLETED,
    }
    attempts = {row["attempt"] for row in state(spark, ledger).values()}
    assert attempts == {1}
