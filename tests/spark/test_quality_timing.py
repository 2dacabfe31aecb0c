"""The no-lost-roots check gives roots the time their policy gives them: a root not yet
past its timeout and grace is not checked, one still receiving events within its idle
timeout is in progress, and one that failed is awaiting its replay for the backoff of
its attempt, unless it was its last attempt (those are dead-lettered at once). Past
that, each one is lost, and the check names it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.ledger import ids
from ackfold.ledger.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.ledger.values import hex64
from ackfold.quality import run_quality
from ackfold.quality.outcomes import AWAITING_REPLAY, IN_PROGRESS
from ackfold.reconcile.reconciler import reconcile
from ackfold.track.tracker import Tracker
from tests.conftest import JARS_DIR
from tests.spark.ledger_io import append

APP = "wc"


def test_roots_get_their_timeout_idle_timeout_and_backoff_before_they_count_as_lost(
    spark: SparkSession, tmp_path: Path
) -> None:
    settings = load_settings(
        var_dir=tmp_path, jars_dir=JARS_DIR,
        apps={
            APP: {"timeout": "5m", "idle_timeout": "10m", "replay_backoff": "10m",
                  "max_attempts": 3}
        },
    )  # fmt: skip
    ledger = Ledger(settings.table_root)
    now = datetime.now(UTC).replace(microsecond=0)
    at = [now]
    tracker = Tracker(APP, clock=lambda: at[0])

    at[0] = now - timedelta(hours=1)  # still busy: its last event came 2 minutes ago
    busy = tracker.spout("busy")
    at[0] = now - timedelta(minutes=2)
    tracker.emit([busy], stage="split")
    tracker.ack(busy, stage="split")
    at[0] = now - timedelta(minutes=30)  # failed 20 minutes ago; attempt 1 waits 10m
    failed = tracker.spout("failed")
    at[0] = now - timedelta(minutes=20)
    tracker.fail(failed, stage="split", reason="bad input")
    # The last attempt (3 of 3) of a message, failed 20 minutes ago: no backoff is owed.
    at[0] = now - timedelta(minutes=30)
    last = tracker.spout("last", attempt=3, origin_root_id=ids.root_id(APP, "test::last"))
    at[0] = now - timedelta(minutes=20)
    tracker.fail(last, stage="split", reason="bad input")
    at[0] = now - timedelta(minutes=1)  # registered a minute ago
    fresh = tracker.spout("fresh")
    append(spark, ledger, ROOTS, tracker.drain_roots())
    append(spark, ledger, ACK_EVENTS, tracker.drain())
    reconcile(spark, settings, now=now - timedelta(minutes=20))  # the failure is seen
    reconcile(spark, settings, now=now)

    report = run_quality(settings, spark=spark, now=now, app=APP)
    assert report.scope == f"app {APP}"
    assert report.apps == (APP,)
    (lost,) = [r for r in report.results if r.check == "no_lost_roots"]
    assert lost.element_count == 3, "the fresh root is not due yet"
    assert lost.unexpected_count == 1, lost.line()
    (named,) = lost.sample
    assert f"root_id={hex64(last.roots[0])}" in named
    assert "outcome=failed, and not replayed" in named

    overdue = {
        row["root_id"]: row["outcome"]
        for row in _overdue(spark, settings, now).collect()
    }  # fmt: skip
    assert overdue == {
        busy.roots[0]: IN_PROGRESS,
        failed.roots[0]: AWAITING_REPLAY,
        last.roots[0]: "failed, and not replayed",
    }

    # Three hours on, with no event and no replay since: all four are lost.
    later = run_quality(settings, spark=spark, now=now + timedelta(hours=3), app=APP)
    (lost,) = [r for r in later.results if r.check == "no_lost_roots"]
    assert not lost.success
    assert lost.unexpected_count == 4
    sample = "; ".join(lost.sample)
    assert f"root_id={hex64(failed.roots[0])}, outcome=failed, and not replayed" in sample
    for root in (busy, fresh):
        assert f"root_id={hex64(root.roots[0])}, outcome=pending past its timeout" in sample


def _overdue(spark: SparkSession, settings, now: datetime):  # type: ignore[no-untyped-def]
    from ackfold.quality.batches import LedgerFrames, Window

    assert settings.quality.window is not None
    return LedgerFrames(spark, settings, Window.ending(now, settings.quality.window)).overdue(APP)
