"""Switching engines (invariant 15): a ledger folded by the embedded engine is folded next
by Spark from the mark they share, whatever happened to the log since, and back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from ackfold.config import Settings, load_settings
from ackfold.ledger.schema.tables import ACK_EVENTS, Ledger
from ackfold.reconcile.fold import classify, fold
from ackfold.track.tracker import Tracker
from tests.conformance.conftest import append, reconciler, state
from tests.conftest import JARS_DIR

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
TIMEOUT = timedelta(minutes=5)


@pytest.fixture
def settings(tmp_path: Any) -> Settings:
    return load_settings(var_dir=tmp_path, jars_dir=JARS_DIR, defaults={"timeout": "5m"})


def _ticks(start: datetime) -> Iterator[datetime]:
    return (start + timedelta(seconds=i) for i in range(10**6))


def _batches(ledger: Ledger, tracker: Tracker, first: int, count: int) -> list[dict[str, Any]]:
    """`count` commits of two roots each (one complete, one waiting)."""
    events: list[dict[str, Any]] = []
    for batch in range(first, first + count):
        for n in range(2):
            root = tracker.spout(f"m{batch}-{n}")
            child = tracker.emit([root], stage="split")
            tracker.ack(root, stage="split")
            if n == 0:
                tracker.ack(child, stage="store")
        batch_events = tracker.drain()
        append(ledger, "roots", tracker.drain_roots())
        append(ledger, "ack_events", batch_events)
        events += batch_events
    return events


def _statuses(ledger: Ledger) -> dict[int, str]:
    return {r: row["status"] for r, row in state(ledger).items()}


@pytest.mark.parametrize("engine", ["spark"])  # on the spark tier's JVM
def test_spark_after_the_embedded_engine_with_nothing_new_since_its_mark(
    request: pytest.FixtureRequest, engine: str, settings: Settings
) -> None:
    ledger = Ledger(settings.table_root)
    events = _batches(ledger, Tracker("orders", clock=_ticks(T0).__next__), 0, 3)
    now = T0 + timedelta(minutes=10)
    embedded = reconciler(request, "embedded")(settings, now=now)
    spark = reconciler(request, engine)(settings, now=now + timedelta(minutes=1))
    assert spark["by_status"] == embedded["by_status"] == {"completed": 3, "timed_out": 3}
    assert spark["events_read"] == 0
    expected = {r: classify(f, now=now, timeout=TIMEOUT) for r, f in fold(events).items()}
    assert _statuses(ledger) == expected


@pytest.mark.parametrize("engine", ["spark"])
def test_spark_after_the_embedded_engine_once_the_log_after_its_mark_is_cleaned_up(
    request: pytest.FixtureRequest, engine: str, settings: Settings
) -> None:
    ledger = Ledger(settings.table_root)
    tracker = Tracker("orders", clock=_ticks(T0).__next__)
    events = _batches(ledger, tracker, 0, 2)
    reconciler(request, "embedded")(settings, now=T0 + timedelta(minutes=1))
    # Enough commits for a checkpoint, then log cleanup with no retention: the commits
    # right after the mark are gone from the log.
    events += _batches(ledger, tracker, 2, 12)
    table = DeltaTable(ledger.path(ACK_EVENTS))
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    table = DeltaTable(ledger.path(ACK_EVENTS))
    table.create_checkpoint()
    table.cleanup_metadata()
    assert not _has_commit(ledger, 3), "the log cleanup left the commit after the mark"

    now = T0 + timedelta(hours=1)
    summary = reconciler(request, engine)(settings, now=now)
    expected = {r: classify(f, now=now, timeout=TIMEOUT) for r, f in fold(events).items()}
    assert _statuses(ledger) == expected
    assert summary["by_status"] == {"completed": 14, "timed_out": 14}
    back = reconciler(request, "embedded")(settings, now=now)
    assert (back["events_read"], back["roots_updated"]) == (0, 0)


def _has_commit(ledger: Ledger, version: int) -> bool:
    return (Path(ledger.path(ACK_EVENTS)) / "_delta_log" / f"{version:020d}.json").exists()
