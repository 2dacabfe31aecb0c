"""A root that times out at a stage whose outputs no stage has ever acked says so in its
timeout reason (`fail_reason`): the sink mistake, reconciled by each engine."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ackfold.config import Settings, load_settings
from ackfold.ledger.reading.pending import AppStages
from ackfold.ledger.reading.reader import LedgerReader
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import Ledger
from ackfold.track.tracker import Tracker
from tests.conformance.conftest import Reconcile, append, state
from tests.conftest import JARS_DIR
from tests.ledger_fixtures import Clock
from tests.sink_mistake import APP, START, word_count


@pytest.fixture
def settings(tmp_path: Any) -> Settings:
    return load_settings(var_dir=tmp_path, jars_dir=JARS_DIR, defaults={"timeout": "1h"})


def test_the_sink_mistake_times_out_with_a_reason_that_points_at_to(
    reconcile: Reconcile, settings: Settings
) -> None:
    ledger = Ledger(settings.table_root)
    clock = Clock(START)
    run = word_count(clock)  # the mistake: count's final emit has no to=[]
    # A root that count never processed: it stops at split, which completed roots went through.
    tracker = Tracker(APP, clock=clock, acks="compact")
    t = tracker.spout("m-split", source="sqs", source_queue="wc-in", payload="never counted")
    tracker.emit([t], stage="split")
    tracker.ack(t, stage="split")
    at_split = t.roots[0]
    append(ledger, "roots", run.registrations + tracker.drain_roots())
    append(ledger, "ack_events", run.events + tracker.drain())

    reconcile(settings, now=START + timedelta(minutes=5))
    first = state(ledger)
    assert first[run.empty]["status"] == status.COMPLETED
    assert {first[r]["status"] for r in run.roots if r != run.empty} == {status.PENDING}

    reconcile(settings, now=START + timedelta(hours=2))
    rows = state(ledger)
    stuck = [r for r in run.roots if r != run.empty]
    assert {rows[r]["status"] for r in stuck} == {status.TIMED_OUT}
    expected = AppStages(APP, frozenset({"spout", "split"}), 1).timeout_reason("count")
    assert expected is not None
    assert "emit it with to=[]" in expected
    assert {rows[r]["fail_reason"] for r in stuck} == {expected}
    assert {rows[r]["fail_stage"] for r in stuck} == {None}, "no fail event: a timeout"
    # Stopped at split, which the completed root went through: no claim about it.
    assert rows[at_split]["status"] == status.TIMED_OUT
    assert rows[at_split]["fail_reason"] is None
    # The reason is what `ackfold show` and the UI read, and a later fold keeps it.
    late = {
        "event_id": "late-1",
        "app": APP,
        "root_id": stuck[0],
        "kind": "ack",
        "ack_val": 12345,
        "stage": "audit",
        "event_time": START + timedelta(hours=2, minutes=1),
        "reason": None,
    }
    append(ledger, "ack_events", [late])
    reconcile(settings, now=START + timedelta(hours=2, minutes=2))
    again = state(ledger)[stuck[0]]
    assert (again["status"], again["event_count"]) == (status.TIMED_OUT, 4)
    assert again["fail_reason"] == expected
    journey = LedgerReader(settings.table_root).show_root(stuck[1])
    assert journey.state.fail_reason == expected
