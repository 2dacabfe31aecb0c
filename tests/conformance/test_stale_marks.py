"""What time does to the mark of what was folded (invariant 17), on both engines:

- files named by the log after the mark were compacted and vacuumed away: the run falls
  back, loudly, to the whole table, and its de-duplication keeps the statuses exact;
- a run killed after its writes and before its mark, whose step completed a root older
  than the lookback, and an `all` run reading events that an `--app` run folded: the
  events they read again are a settled root's, not events waiting for their root."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from deltalake import DeltaTable

from ackfold.config import Settings, load_settings
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ACK_EVENTS, Ledger
from ackfold.reconcile.embedded import EmbeddedReconciler
from ackfold.reconcile.fold import classify, fold
from ackfold.reconcile.reconciler import Reconciler
from ackfold.track.tracker import Tracker
from tests.conformance.conftest import Reconcile, append, state, waiting
from tests.conftest import JARS_DIR

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
TIMEOUT = timedelta(minutes=5)


@pytest.fixture
def settings(tmp_path: Any) -> Settings:
    return load_settings(var_dir=tmp_path, jars_dir=JARS_DIR, defaults={"timeout": "5m"})


@pytest.fixture
def ledger(settings: Settings) -> Ledger:
    return Ledger(settings.table_root)


def _ticks(start: datetime) -> Iterator[datetime]:
    return (start + timedelta(seconds=i) for i in range(10**6))


def _commit(ledger: Ledger, tracker: Tracker) -> list[dict[str, Any]]:
    events = tracker.drain()
    append(ledger, "roots", tracker.drain_roots())
    append(ledger, "ack_events", events)
    return events


def _expected(events: list[dict[str, Any]], now: datetime) -> dict[int, str]:
    return {r: classify(f, now=now, timeout=TIMEOUT) for r, f in fold(events).items()}


def test_files_vacuumed_after_the_mark_fall_back_to_the_whole_table_loudly(
    reconcile: Reconcile,
    settings: Settings,
    ledger: Ledger,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tracker = Tracker("orders", clock=_ticks(T0).__next__)
    events: list[dict[str, Any]] = []
    for batch in range(6):
        for n in range(5):
            root = tracker.spout(f"m{batch}-{n}")
            child = tracker.emit([root], stage="split")
            tracker.ack(root, stage="split")
            if n != 2:
                tracker.ack(child, stage="store")
        events += _commit(ledger, tracker)
        if batch == 2:  # half the commits folded, the rest appended after the mark
            reconcile(settings, now=T0 + timedelta(minutes=1))
    # The daily Z-order rewrites every file; VACUUM then deletes the ones it replaced.
    table = DeltaTable(ledger.path(ACK_EVENTS))
    table.optimize.z_order(["root_id"])
    assert DeltaTable(ledger.path(ACK_EVENTS)).vacuum(
        0, dry_run=False, enforce_retention_duration=False
    )

    now = T0 + timedelta(hours=1)
    with caplog.at_level(logging.WARNING):
        summary = reconcile(settings, now=now)
    assert {r: row["status"] for r, row in state(ledger).items()} == _expected(events, now)
    assert summary["by_status"] == {"completed": 24, "timed_out": 6}
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(
        ACK_EVENTS in line and ".parquet" in line and "whole table" in line for line in warned
    ), warned
    assert waiting(ledger) == []


class Killed(BaseException):
    """The run's process dies here (nothing after it runs, no handler sees it)."""


def _killed_after_writes(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """The engine's next step dies once its writes are committed, before its mark."""
    cls: Any = EmbeddedReconciler if engine == "embedded" else Reconciler
    write = cls._write

    def write_then_die(self: Any, *args: Any, **kwargs: Any) -> Any:
        write(self, *args, **kwargs)
        monkeypatch.setattr(cls, "_write", write)
        raise Killed

    monkeypatch.setattr(cls, "_write", write_then_die)


def _late_completion(ledger: Ledger) -> tuple[Tracker, int, list[dict[str, Any]]]:
    """A root that timed out on day 0, and the late ack of its child on day 5: the root
    completes then, older than the lookback (2 days)."""
    clock = [T0]
    tracker = Tracker("orders", clock=lambda: clock[0])
    root = tracker.spout("m1")
    child = tracker.emit([root], stage="split")
    tracker.ack(root, stage="split")
    first = _commit(ledger, tracker)
    clock[0] = T0 + timedelta(days=5)
    tracker.ack(child, stage="store")
    (root_id,) = root.roots
    return tracker, root_id, first


def test_a_run_killed_after_completing_an_old_root_leaves_no_event_waiting(
    reconcile: Reconcile,
    engine: str,
    settings: Settings,
    ledger: Ledger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tracker, root_id, first = _late_completion(ledger)
    reconcile(settings, now=T0 + timedelta(minutes=10))
    assert state(ledger)[root_id]["status"] == status.TIMED_OUT
    late = _commit(ledger, tracker)

    day5 = T0 + timedelta(days=5, minutes=1)
    _killed_after_writes(monkeypatch, engine)
    with pytest.raises(Killed):
        reconcile(settings, now=day5)
    assert state(ledger)[root_id]["status"] == status.COMPLETED  # written, not marked

    summary = reconcile(settings, now=day5)
    assert (summary["unmatched_events"], waiting(ledger)) == (0, [])
    assert list(state(ledger)) == [root_id]
    assert state(ledger)[root_id]["status"] == status.COMPLETED
    assert _expected(first + late, day5) == {root_id: status.COMPLETED}
    again = reconcile(settings, now=day5 + timedelta(hours=1))
    assert (again["unmatched_events"], again["events_read"]) == (0, 0)


def test_a_full_run_after_an_app_run_leaves_no_event_waiting(
    reconcile: Reconcile, settings: Settings, ledger: Ledger
) -> None:
    tracker, root_id, _ = _late_completion(ledger)
    reconcile(settings, now=T0 + timedelta(minutes=10))
    _commit(ledger, tracker)
    day5 = T0 + timedelta(days=5, minutes=1)
    reconcile(settings, now=day5, app="orders")
    assert state(ledger)[root_id]["status"] == status.COMPLETED

    summary = reconcile(settings, now=day5)  # reads the late ack that `--app` folded
    assert (summary["unmatched_events"], waiting(ledger)) == (0, [])
    assert list(state(ledger)) == [root_id]
    assert state(ledger)[root_id]["status"] == status.COMPLETED
