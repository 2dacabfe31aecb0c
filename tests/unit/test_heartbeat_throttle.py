"""The heartbeat's throttle in plain Python (`Heartbeat`, a fake clock): a query's first
progress waits for its start, which Spark Connect posts after the first progress may have
come; without a start it is written one interval after the query was first seen."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ackfold.track.heartbeat import PROGRESS, STARTED, TERMINATED, Heartbeat, progress_row

AT = datetime(2024, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def beat(clock: Clock) -> tuple[Heartbeat, list[dict[str, Any]]]:
    written: list[dict[str, Any]] = []
    return Heartbeat("app", written.extend, interval=10, clock=clock), written


def row(event: str, batch: int | None = None) -> dict[str, Any]:
    return {**progress_row("app", "q1", "r1", "app.count", batch, AT), "event": event}


def test_a_progress_before_its_start_waits_and_the_start_is_written_first() -> None:
    clock = Clock()
    heartbeat, written = beat(clock)
    heartbeat.record(row(PROGRESS, 0))  # Connect: the bus thread's first progress
    assert written == []
    clock.now = 0.2
    heartbeat.record(row(STARTED))  # posted by the thread that called start()
    clock.now = 5
    heartbeat.record(row(PROGRESS, 1))
    clock.now = 10.2
    heartbeat.record(row(PROGRESS, 2))
    clock.now = 11
    heartbeat.record(row(TERMINATED))
    assert [(r["event"], r["batch_id"]) for r in written] == [
        (STARTED, None),
        (PROGRESS, 2),
        (TERMINATED, None),
    ]


def test_without_a_start_the_first_progress_is_written_an_interval_after_it_came() -> None:
    clock = Clock()
    heartbeat, written = beat(clock)
    heartbeat.record(row(PROGRESS, 0))
    clock.now = 9.9
    heartbeat.record(row(PROGRESS, 1))
    assert written == []
    clock.now = 10
    heartbeat.record(row(PROGRESS, 2))
    assert [r["batch_id"] for r in written] == [2]
    heartbeat.record(row(PROGRESS, 3))
    heartbeat.flush()  # on shutdown, what is held is written
    assert [r["batch_id"] for r in written] == [2, 3]
