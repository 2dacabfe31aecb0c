"""Time to detect and to recover from root_state rows (`ackfold.ledger.reading.recovery`), and
the lines they add to the demo's delivery report."""

from __future__ import annotations

import doctest
from datetime import timedelta
from pathlib import Path

from ackfold.config import load_settings
from ackfold.config.policy import AppPolicy
from ackfold.demo.report import DeliveryReport
from ackfold.ledger.reading import recovery
from ackfold.ledger.reading.recovery import (
    Percentiles,
    RecoveryTimes,
    read_recovery,
    recovery_times,
)
from ackfold.ledger.reading.sql import SqlReader
from ackfold.ledger.schema import status
from tests.alert_fixtures import ago, state, write_state

POLICY = AppPolicy(timeout=timedelta(minutes=5))


DETECTED_ROWS = [
    # Failed: due at its fail event (10 minutes ago), marked 2 minutes later.
    state(1, "a", status.FAILED, ago(12), ago(8), fail_at=ago(10)),
    # Timed out: due 5 minutes after its first event, marked 1 minute after that.
    state(2, "a", status.TIMED_OUT, ago(20), ago(14)),
    # Replayed since: marked when its last reconcile changed it (not the replay).
    state(3, "a", status.REPLAYED, ago(30), ago(5), reconciled=ago(22)),
    # Dead-lettered: the same.
    state(4, "a", status.DEAD_LETTERED, ago(40), ago(5), fail_at=ago(40), reconciled=ago(36)),
    # Completed late: the late completion overwrote when it was marked.
    state(5, "a", status.COMPLETED_LATE, ago(50), ago(1)),
]


def test_detection_counts_from_due_to_marked_whatever_became_of_the_root() -> None:
    times = recovery_times(DETECTED_ROWS, lambda app: POLICY)
    assert times.detect == Percentiles.of([120.0, 60.0, 180.0, 240.0])
    assert (times.detect.count, times.detect.p50) == (4, 150.0)
    assert times.recover == Percentiles(0, None, None)
    assert times.unrecovered == 5


def test_recovery_runs_from_the_first_attempts_due_to_the_replay_that_completed() -> None:
    rows = [
        state(1, "a", status.REPLAYED, ago(30), ago(24), fail_at=ago(30), reconciled=ago(28)),
        state(2, "a", status.REPLAYED, ago(24), ago(15), attempt=2, origin=1, reconciled=ago(18)),
        state(3, "a", status.COMPLETED, ago(15), ago(9), last=ago(10), attempt=3, origin=1),
    ]
    times = recovery_times(rows, lambda app: POLICY)
    assert (times.recover.count, times.recover.p50) == (1, 1200.0)  # 30 -> 10 minutes ago
    assert times.unrecovered == 0
    # An idle timeout moves a root's due time to its last event plus the idle timeout.
    idle = AppPolicy(timeout=timedelta(minutes=5), idle_timeout=timedelta(minutes=8))
    late = [state(9, "a", status.TIMED_OUT, ago(20), ago(2), last=ago(11))]
    assert recovery_times(late, lambda app: idle).detect.p50 == 60.0


def test_read_from_the_ledger_they_are_the_same_numbers(tmp_path: Path) -> None:
    """`read_recovery` (delta-rs, for the UI) computes in SQL what `recovery_times`
    computes over rows (the demo's report, from Spark): the same numbers, per app policy,
    over every case above, a message still unrecovered, a clock that runs backwards, and
    the filters the overview passes."""
    rows = [
        *DETECTED_ROWS,
        state(6, "a", status.COMPLETED, ago(29), ago(20), last=ago(25), attempt=2, origin=3),
        # Another app: its own timeout and idle timeout.
        state(7, "b", status.TIMED_OUT, ago(20), ago(2), last=ago(11)),
        state(8, "b", status.REPLAYED, ago(60), ago(40), fail_at=ago(60), reconciled=ago(50)),
        state(9, "b", status.REPLAYED, ago(40), ago(30), attempt=2, origin=8, reconciled=ago(35)),
        state(10, "b", status.COMPLETED, ago(30), ago(20), last=ago(21), attempt=3, origin=8),
        # Marked before it was due (clocks disagree): counted as 0, not negative.
        state(11, "b", status.FAILED, ago(9), ago(9.5), fail_at=ago(9)),
        # A healthy first attempt: not read.
        state(12, "a", status.COMPLETED, ago(70), ago(69)),
    ]
    write_state(tmp_path / "wh", rows)
    settings = load_settings(
        var_dir=tmp_path / "var", warehouse=str(tmp_path / "wh"),
        defaults={"timeout": "5m"}, apps={"b": {"timeout": "3m", "idle_timeout": "8m"}},
    )  # fmt: skip
    reader = SqlReader(settings.table_root)
    for app, since, until in ((None, None, None), ("b", None, None), (None, ago(45), ago(10))):
        chosen = [
            r for r in rows
            if app in (None, r["app"])
            and (since is None or r["first_event_at"] >= since)
            and (until is None or r["first_event_at"] < until)
        ]  # fmt: skip
        wanted = recovery_times(
            [r for r in chosen if r["status"] in recovery.DETECTED or r["attempt"] > 1],
            settings.app,
        )
        found = read_recovery(reader, settings, app=app, since=since, until=until)
        assert found == wanted, (app, since, until)
    assert found.detect.count > 0
    everything = read_recovery(reader, settings)
    assert everything.recover.count == 2
    assert everything.unrecovered == 6  # 1, 2, 4, 5, 7 and 11: no later attempt completed


def test_the_delivery_report_shows_them() -> None:
    report = DeliveryReport(faults="seed 1", sent=10, poison=1)
    report.recovery = RecoveryTimes(Percentiles.of([4.0, 6.0]), Percentiles(0, None, None), 1)
    lines = report.lines()
    assert lines[-2] == f"  {'time to detect':<28}p50 5.0 s, p99 6.0 s   2 roots, due -> marked"
    assert lines[-1] == f"  {'time to recover':<28}none"
    assert "recovery" not in report.outcome()


def test_doctests() -> None:
    assert doctest.testmod(recovery).failed == 0
