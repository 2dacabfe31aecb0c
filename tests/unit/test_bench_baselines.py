"""The benchmark's baselines fold like ackfold's reference fold: the figures they produce
compare the same work (bench/baselines.py)."""

from __future__ import annotations

import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ackfold.reconcile.fold import classify, fold
from ackfold.track.tracker import Tracker

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from baselines import StormAcker, duckdb_fold

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TIMEOUT = timedelta(minutes=5)


def topology() -> list[dict[str, Any]]:
    """Four roots: one complete, one failed, one missing an ack (started early), one open."""
    clock = [T0]
    tracker = Tracker("orders", clock=lambda: clock[0])
    done, failed, lost = (tracker.spout(f"m-{n}") for n in range(3))
    for sentence in (done, failed, lost):
        words = [tracker.emit([sentence], stage="split") for _ in range(3)]
        tracker.ack(sentence, stage="split")
        for word in words[:-1]:
            tracker.ack(word, stage="count")
        if sentence is done:
            tracker.ack(words[-1], stage="count")
        elif sentence is failed:
            tracker.fail(words[-1], stage="count", reason="bad word")
    clock[0] = T0 + timedelta(minutes=10)
    tracker.spout("m-late")  # started after the deadline: still pending
    return tracker.drain()


def expected(events: list[dict[str, Any]], now: datetime) -> dict[str, int]:
    folds = fold(events)
    return dict(Counter(classify(f, now=now, timeout=TIMEOUT) for f in folds.values()))


def write(events: list[dict[str, Any]], path: Path) -> list[str]:
    pq.write_table(pa.Table.from_pylist(events), path)
    return [str(path)]


def test_duckdb_fold_matches_the_reference_and_drops_duplicates(tmp_path: Path) -> None:
    events = topology()
    now = T0 + timedelta(minutes=12)
    want = expected(events, now)
    assert want == {"completed": 1, "failed": 1, "timed_out": 1, "pending": 1}
    # Every event twice: XOR would cancel each pair if the fold kept duplicates.
    files = write(events + events, tmp_path / "events.parquet")
    got = duckdb_fold(files, now - TIMEOUT, tmp_path / "state.parquet")
    assert got == want
    state = pq.read_table(tmp_path / "state.parquet").to_pylist()
    failed = next(row for row in state if row["status"] == "failed")
    assert failed["fail_reason"] == "bad word"
    reference = fold(events)
    assert {row["root_id"]: row["event_count"] for row in state} == {
        root: f.event_count for root, f in reference.items()
    }
    assert {row["root_id"]: row["xor_acc"] for row in state} == {
        root: f.xor_acc for root, f in reference.items()
    }


def test_storm_acker_matches_the_reference(tmp_path: Path) -> None:
    events = topology()
    now = T0 + timedelta(minutes=12)
    acker = StormAcker()
    files = write(events, tmp_path / "events.parquet")
    assert acker.fold_files(files, batch_rows=5) == len(events)
    deadline_us = int((now - TIMEOUT).timestamp() * 1_000_000)
    assert acker.statuses(deadline_us) == expected(events, now)
