"""A reconcile with nothing to do is answered without Spark, and only then.

`reconcile_quietly` takes no session, so it cannot start a Spark job: each test checks
that its answer is the summary a Spark run gives on the same ledger at the same time, and
that whatever a Spark run would write (a new event, a timeout due, a policy that changes
a status, a table made anew) sends the run to Spark instead."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits.marks import read_mark
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.reconcile.reconciler import reconcile_quietly
from ackfold.runs.reconcile import reconcile
from ackfold.track.tracker import Tracker
from tests.conftest import JARS_DIR
from tests.spark.ledger_io import append, state

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def _settings(tmp_path: Path, timeout: str = "5m") -> Settings:
    return load_settings(var_dir=tmp_path, jars_dir=JARS_DIR, defaults={"timeout": timeout})


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return _settings(tmp_path)


def _track(spark: SparkSession, settings: Settings, at: datetime, app: str = "orders") -> None:
    """A completed root, a failed one and one left pending, all started at `at`."""
    tracker = Tracker(app, clock=lambda: at)
    done = tracker.spout("done")
    tracker.ack(done, stage="split")
    bad = tracker.spout("bad")
    tracker.fail(bad, stage="split", reason="unparseable")
    stuck = tracker.spout("stuck")
    tracker.emit([stuck], stage="split")  # never acked downstream
    tracker.ack(stuck, stage="split")
    ledger = Ledger(settings.table_root)
    append(spark, ledger, ROOTS, tracker.drain_roots())
    append(spark, ledger, ACK_EVENTS, tracker.drain())


def test_quiet_until_a_timeout_is_due_then_spark_writes_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    settings = _settings(tmp_path)
    _track(spark, settings, T0)
    assert reconcile_quietly(settings, now=T0) is None, "never reconciled: Spark must run"
    reconcile(spark, settings, now=T0 + timedelta(minutes=1))

    later = T0 + timedelta(minutes=2)  # the pending root is not due yet
    quiet = reconcile_quietly(settings, now=later)
    assert quiet is not None
    assert quiet["by_status"] == {"completed": 1, "failed": 1, "pending": 1}
    before = state(spark, Ledger(settings.table_root))
    # `reconcile` (run_reconcile on the Spark engine) takes the same quiet path: no job.
    again = reconcile(spark, settings, now=later)
    assert again.pop("engine") == "quiet"
    assert again == quiet
    assert state(spark, Ledger(settings.table_root)) == before

    due = T0 + timedelta(minutes=6)
    assert reconcile_quietly(settings, now=due) is None
    assert reconcile(spark, settings, now=due)["by_status"]["timed_out"] == 1
    quiet = reconcile_quietly(settings, now=due + timedelta(minutes=1))
    assert quiet is not None
    assert quiet["by_status"]["timed_out"] == 1

    # A longer timeout would reopen the timed-out root: applying it is Spark's work.
    longer = _settings(tmp_path, timeout="1h")
    assert reconcile_quietly(longer, now=due + timedelta(minutes=1)) is None
    summary = reconcile(spark, longer, now=due + timedelta(minutes=1))
    assert summary["by_status"]["pending"] == 1


def test_a_new_event_or_a_table_made_anew_goes_to_spark(
    spark: SparkSession, settings: Settings
) -> None:
    _track(spark, settings, T0)
    reconcile(spark, settings, now=T0 + timedelta(minutes=1))
    assert reconcile_quietly(settings, now=T0 + timedelta(minutes=2)) is not None

    _track(spark, settings, T0 + timedelta(minutes=2))
    assert reconcile_quietly(settings, now=T0 + timedelta(minutes=3)) is None
    summary = reconcile(spark, settings, now=T0 + timedelta(minutes=3))
    assert summary["events_read"] > 0
    assert reconcile_quietly(settings, now=T0 + timedelta(minutes=4)) is not None

    # The same version number of another table (made anew at the same path) is not a
    # version this checkpoint has read.
    from ackfold.ledger.setup.create import CREATED

    path = Path(Ledger(settings.table_root).path(ACK_EVENTS))
    before = DeltaTable(str(path))
    folded = read_mark(Ledger(settings.table_root), None, str(before.metadata().id))
    shutil.rmtree(path)
    CREATED.discard(str(path))
    _track(spark, settings, T0 + timedelta(minutes=4))
    _track(spark, settings, T0 + timedelta(minutes=4))
    made_anew = DeltaTable(str(path))
    assert made_anew.version() == folded, "the same version number: only the id tells them apart"
    assert read_mark(Ledger(settings.table_root), None, str(made_anew.metadata().id)) is None
    assert reconcile_quietly(settings, now=T0 + timedelta(minutes=5)) is None


def test_each_app_scope_keeps_its_own_mark(spark: SparkSession, settings: Settings) -> None:
    _track(spark, settings, T0, app="orders")
    _track(spark, settings, T0, app="billing")
    reconcile(spark, settings, now=T0 + timedelta(minutes=1), app="orders")
    quiet = reconcile_quietly(settings, now=T0 + timedelta(minutes=2), app="orders")
    assert quiet is not None
    assert quiet["app"] == "orders"
    assert sum(quiet["by_status"].values()) == 3, "the orders roots only"
    assert reconcile_quietly(settings, now=T0 + timedelta(minutes=2)) is None, "never run"
    events = DeltaTable(Ledger(settings.table_root).path(ACK_EVENTS))
    ledger, events_id = Ledger(settings.table_root), str(events.metadata().id)
    assert read_mark(ledger, "orders", events_id) == events.version()
    assert read_mark(ledger, None, events_id) is None


def test_each_apps_own_timeout_and_idle_timeout_decide(spark: SparkSession, tmp_path: Path) -> None:
    settings = load_settings(
        var_dir=tmp_path, jars_dir=JARS_DIR, defaults={"timeout": "5m"},
        apps={"slow": {"timeout": "1h", "idle_timeout": "2m"}},
    )  # fmt: skip
    _track(spark, settings, T0, app="slow")
    reconcile(spark, settings, now=T0 + timedelta(minutes=1))
    # Past the default 5 minutes, within the app's hour: nothing is due.
    quiet = reconcile_quietly(settings, now=T0 + timedelta(minutes=30))
    assert quiet is not None
    assert quiet["by_status"]["pending"] == 1
    # Past the hour and idle for longer than 2 minutes: its timeout is due.
    assert reconcile_quietly(settings, now=T0 + timedelta(minutes=61)) is None
