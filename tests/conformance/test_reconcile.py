"""Each engine against the plain-Python reference fold, on real Delta tables."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ackfold.config import Settings, load_settings
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import Ledger
from ackfold.reconcile.fold import classify, fold
from ackfold.track.tracker import Tracker
from tests.conformance.conftest import Reconcile, set_status, state, waiting
from tests.conformance.conftest import append as _append
from tests.conftest import JARS_DIR

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
TIMEOUT = timedelta(minutes=5)


@pytest.fixture
def settings(tmp_path: Any) -> Settings:
    return load_settings(
        var_dir=tmp_path,
        jars_dir=JARS_DIR,
        defaults={"timeout": "5m"},
        apps={"slow": {"timeout": "1h", "idle_timeout": "2m"}},
    )


@pytest.fixture
def ledger(settings: Settings) -> Ledger:
    return Ledger(settings.table_root)


def _clock(start: datetime = T0) -> Iterator[datetime]:
    return (start + timedelta(seconds=i) for i in itertools.count())


def _topology(tracker: Tracker) -> None:
    """Storm's word count, with a complete tree, an unfinished one, a failure and a join."""
    done = tracker.spout("m1")
    words = [tracker.emit([done], stage="split") for _ in range(3)]
    tracker.ack(done, stage="split")
    for word in words:
        tracker.ack(word, stage="count")

    stuck = tracker.spout("m2")
    tracker.emit([stuck], stage="split")  # emitted, never acked downstream
    tracker.ack(stuck, stage="split")

    bad = tracker.spout("m3")
    tracker.fail(bad, stage="split", reason="unparseable sentence")

    left, right = tracker.spout("m4"), tracker.spout("m5")
    joined = tracker.emit([left, right, left], stage="join")  # two roots, one parent twice
    tracker.ack(left, stage="join")
    tracker.ack(right, stage="join")
    tracker.ack(joined, stage="sink")


def _expected(events: list[dict[str, Any]], now: datetime) -> dict[int, tuple[str, int, str]]:
    return {
        root: (classify(f, now=now, timeout=TIMEOUT), f.xor_acc, f.last_stage)
        for root, f in fold(events).items()
    }


def _actual(ledger: Ledger) -> dict[int, tuple[str, int, str]]:
    return {
        r: (row["status"], row["xor_acc"], row["last_stage"]) for r, row in state(ledger).items()
    }


def append(ledger: Ledger, table: str, rows: list[dict[str, Any]]) -> None:
    _append(ledger, table, rows)


def test_one_run_matches_the_reference_fold(
    reconcile: Reconcile, settings: Settings, ledger: Ledger
) -> None:
    tracker = Tracker("wordcount", clock=_clock().__next__)
    _topology(tracker)
    events, roots = tracker.drain(), tracker.drain_roots()
    append(ledger, "roots", roots)
    append(ledger, "ack_events", events)

    now = T0 + timedelta(minutes=10)
    summary = reconcile(settings, now=now)

    assert _actual(ledger) == _expected(events, now)
    assert summary["by_status"] == {"completed": 3, "failed": 1, "timed_out": 1}
    assert summary["events_read"] == len(events)
    failed = next(row for row in state(ledger).values() if row["status"] == status.FAILED)
    assert (failed["fail_reason"], failed["fail_stage"]) == ("unparseable sentence", "split")
    assert {row["attempt"] for row in state(ledger).values()} == {1}


def test_order_splits_and_duplicates_change_nothing(
    reconcile: Reconcile, settings: Settings, ledger: Ledger
) -> None:
    tracker = Tracker("wordcount", clock=_clock().__next__)
    _topology(tracker)
    events = tracker.drain()
    append(ledger, "roots", tracker.drain_roots())

    shuffled = random.Random(7).sample(events, len(events))
    runs = [shuffled[:4], shuffled[4:9] + shuffled[:2], shuffled[9:] + shuffled[5:7]]
    for batch in runs:
        append(ledger, "ack_events", batch)
        reconcile(settings, now=T0 + timedelta(minutes=1))

    now = T0 + timedelta(minutes=10)
    summary = reconcile(settings, now=now)
    assert _actual(ledger) == _expected(events, now)
    assert summary["events_read"] == 0
    counts = {r: row["event_count"] for r, row in state(ledger).items()}
    assert counts == {r: f.event_count for r, f in fold(events).items()}


def test_running_twice_on_the_same_input_changes_nothing(
    reconcile: Reconcile, settings: Settings, ledger: Ledger
) -> None:
    tracker = Tracker("wordcount", clock=_clock().__next__)
    _topology(tracker)
    append(ledger, "roots", tracker.drain_roots())
    append(ledger, "ack_events", tracker.drain())
    now = T0 + timedelta(minutes=10)
    reconcile(settings, now=now)
    before = state(ledger)
    summary = reconcile(settings, now=now)
    assert state(ledger) == before
    assert summary["roots_updated"] == 0


def test_timeouts_per_app_and_idle_timeout_keeps_progressing_roots_pending(
    reconcile: Reconcile, settings: Settings, ledger: Ledger
) -> None:
    fast = Tracker("wordcount", clock=_clock().__next__)
    fast.emit([fast.spout("f1")], stage="split")
    slow = Tracker("slow", clock=_clock().__next__)
    root = slow.spout("s1")
    append(ledger, "ack_events", fast.drain() + slow.drain())

    reconcile(settings, now=T0 + timedelta(minutes=1))
    assert {row["app"]: row["status"] for row in state(ledger).values()} == {
        "wordcount": status.PENDING,
        "slow": status.PENDING,
    }
    # Past wordcount's 5 min timeout; slow's 1 h timeout is far away.
    reconcile(settings, now=T0 + timedelta(minutes=6))
    assert {row["app"]: row["status"] for row in state(ledger).values()} == {
        "wordcount": status.TIMED_OUT,
        "slow": status.PENDING,
    }
    # Past slow's timeout, but it made progress a minute ago: the idle timeout keeps it open.
    later = T0 + timedelta(hours=2)
    slow.emit([root], stage="split")
    slow.ack(root, stage="split")  # progress: one ack, a minute before `later`
    ack_row = {**slow.drain()[0], "event_time": later - timedelta(minutes=1)}
    append(ledger, "ack_events", [ack_row])
    reconcile(settings, now=later)
    slow_state = next(row for row in state(ledger).values() if row["app"] == "slow")
    assert slow_state["status"] == status.PENDING
    reconcile(settings, now=later + timedelta(minutes=3))
    slow_state = next(row for row in state(ledger).values() if row["app"] == "slow")
    assert slow_state["status"] == status.TIMED_OUT


def test_a_replayed_root_that_completes_late_is_a_duplicate_delivery(
    reconcile: Reconcile, settings: Settings, ledger: Ledger
) -> None:
    tracker = Tracker("wordcount", clock=_clock().__next__)
    root = tracker.spout("m1")
    word = tracker.emit([root], stage="split")
    tracker.ack(root, stage="split")
    early = tracker.drain()
    append(ledger, "ack_events", early)
    reconcile(settings, now=T0 + timedelta(minutes=10))
    # The replay engine marks it replayed (here: by hand, as it will through Delta).
    set_status(ledger, status.REPLAYED)
    tracker.ack(word, stage="count")  # the old attempt finishes after all
    append(ledger, "ack_events", tracker.drain())
    reconcile(settings, now=T0 + timedelta(minutes=11))
    (row,) = state(ledger).values()
    assert row["status"] == status.COMPLETED_LATE
    assert row["xor_acc"] == 0


def test_a_late_ack_after_an_outage_longer_than_the_lookback_completes_its_replayed_root(
    reconcile: Reconcile, settings: Settings, ledger: Ledger
) -> None:
    """Reconcile stops for five days (the lookback is two): the old attempt of a root
    replayed before the outage finishes on day 1, new messages arrive on day 5, and the
    one run after the outage folds them all as the reference fold does over every event
    (a window starting a lookback before `now` took the late ack for a copy)."""
    clock = [T0]
    tracker = Tracker("wordcount", clock=lambda: clock[0])
    root = tracker.spout("m1")
    word = tracker.emit([root], stage="split")
    tracker.ack(root, stage="split")
    (replayed,) = root.roots
    early = tracker.drain()
    append(ledger, "roots", tracker.drain_roots())
    append(ledger, "ack_events", early)
    reconcile(settings, now=T0 + timedelta(minutes=10))
    set_status(ledger, status.REPLAYED)  # as the replay engine's bookkeeping would

    clock[0] = T0 + timedelta(days=1)  # the outage began; the old attempt finishes
    tracker.ack(word, stage="count")
    late = tracker.drain()
    append(ledger, "ack_events", late)
    clock[0] = T0 + timedelta(days=5)
    newer = tracker.spout("m2")
    tracker.ack(newer, stage="split")
    tracker.spout("m3")
    newest = tracker.drain()
    append(ledger, "roots", tracker.drain_roots())
    append(ledger, "ack_events", newest)

    now = T0 + timedelta(days=5, minutes=1)
    assert now - T0 > settings.reconcile.lookback
    summary = reconcile(settings, now=now)
    expected = {
        r: (
            classify(
                f, now=now, timeout=TIMEOUT, prior_status=status.REPLAYED if r == replayed else None
            ),
            f.xor_acc,
        )
        for r, f in fold(early + late + newest).items()
    }
    assert expected[replayed] == (status.COMPLETED_LATE, 0)
    actual = {r: (row["status"], row["xor_acc"]) for r, row in state(ledger).items()}
    assert actual == expected
    assert (summary["unmatched_events"], waiting(ledger)) == (0, [])


def test_events_of_an_unknown_root_wait_until_their_init_arrives(
    reconcile: Reconcile, settings: Settings, ledger: Ledger
) -> None:
    tracker = Tracker("wordcount", clock=_clock().__next__)
    root = tracker.spout("m1")
    init = tracker.drain()
    tracker.ack(root, stage="split")
    append(ledger, "ack_events", tracker.drain())  # the ack, before its init

    summary = reconcile(settings, now=T0 + timedelta(seconds=30))
    assert summary["unmatched_events"] == 1
    assert state(ledger) == {}

    append(ledger, "ack_events", init)
    summary = reconcile(settings, now=T0 + timedelta(minutes=1))
    assert summary["unmatched_events"] == 0
    assert waiting(ledger) == []
    (row,) = state(ledger).values()
    assert (row["status"], row["event_count"]) == (status.COMPLETED, 2)


def test_reconcile_of_one_app_leaves_other_apps_alone(
    reconcile: Reconcile, settings: Settings, ledger: Ledger
) -> None:
    a = Tracker("wordcount", clock=_clock().__next__)
    a.spout("m1")
    b = Tracker("slow", clock=_clock().__next__)
    b.spout("m1")
    append(ledger, "ack_events", a.drain() + b.drain())
    summary = reconcile(settings, now=T0, app="slow")
    assert summary["by_status"] == {"pending": 1}
    assert {row["app"] for row in state(ledger).values()} == {"slow"}


def test_a_root_older_than_the_lookback_keeps_one_row_when_its_events_come_again(
    reconcile: Reconcile, settings: Settings, ledger: Ledger
) -> None:
    tracker = Tracker("wordcount", clock=_clock().__next__)
    root = tracker.spout("m1")
    tracker.ack(root, stage="split")
    append(ledger, "ack_events", tracker.drain())
    reconcile(settings, now=T0 + timedelta(minutes=1), app="wordcount")
    # A full run ten days later reads the same events again (its checkpoint is new): the
    # root's row is found on the day its events name, and they are dropped as duplicates.
    summary = reconcile(settings, now=T0 + timedelta(days=10))
    (row,) = state(ledger).values()
    assert row["status"] == status.COMPLETED
    assert (summary["unmatched_events"], summary["duplicates_dropped"]) == (0, 2)
