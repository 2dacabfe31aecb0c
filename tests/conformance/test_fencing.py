"""Fencing (invariant 16): a reconcile that lost the ledger's lease while it was frozen
commits nothing once it wakes up, on either engine, and the run that took over is left
exactly as it wrote it.

Two hosts share one warehouse: each has its own var dir (its own lock file), as two
Airflow workers would. Host A is frozen after folding and before writing (its engine's
`_write` waits); host B finds A's lease expired (A's renewals stopped: B is let take the
lease as if its time to live had run out), reconciles, and gives the lease back; then A
wakes up and tries to write what it folded before."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.schema.tables import ROOT_STATE, Ledger
from ackfold.reconcile.embedded import EmbeddedReconciler
from ackfold.reconcile.fold import classify, fold
from ackfold.reconcile.reconciler import Reconciler
from ackfold.track.tracker import Tracker
from tests.conformance.conftest import Reconcile, append, read, reconciler
from tests.conftest import JARS_DIR

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=10)
TIMEOUT = timedelta(minutes=5)


def _host(tmp_path: Path, name: str) -> Settings:
    return load_settings(
        var_dir=tmp_path / name, warehouse=str(tmp_path / "warehouse"), jars_dir=JARS_DIR
    )


def _events(ledger: Ledger, roots: int, first: int = 0) -> list[dict[str, Any]]:
    """`roots` new roots, each complete or waiting, committed in one append."""
    ticks = iter(T0 + timedelta(seconds=i) for i in range(10**6))
    tracker = Tracker("orders", clock=ticks.__next__)
    for n in range(first, first + roots):
        root = tracker.spout(f"m{n}")
        child = tracker.emit([root], stage="split")
        tracker.ack(root, stage="split")
        if n % 3:
            tracker.ack(child, stage="store")
    events = tracker.drain()
    append(ledger, "roots", tracker.drain_roots())
    append(ledger, "ack_events", events)
    return events


def test_a_run_that_lost_its_lease_commits_nothing_when_it_wakes_up(
    request: pytest.FixtureRequest,
    engine: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host_a, host_b = _host(tmp_path, "a"), _host(tmp_path, "b")
    ledger = Ledger(host_a.table_root)
    events = _events(ledger, 30)
    reconcile_a = reconciler(request, engine)
    reconcile_b: Reconcile = reconciler(request, "embedded")

    engine_class: Any = EmbeddedReconciler if engine == "embedded" else Reconciler
    write = engine_class._write
    frozen, wake = threading.Event(), threading.Event()

    def freeze_then_write(self: Any, *args: Any, **kwargs: Any) -> Any:
        frozen.set()
        assert wake.wait(120), "host A was never woken up"
        return write(self, *args, **kwargs)

    monkeypatch.setattr(engine_class, "_write", freeze_then_write)
    outcome: dict[str, Any] = {}

    def run_a() -> None:
        try:
            outcome["summary"] = reconcile_a(host_a, now=NOW)
        except BaseException as exc:  # what host A's run ended with
            outcome["error"] = exc

    a = threading.Thread(target=run_a, name="host-a")
    a.start()
    try:
        assert frozen.wait(300), "host A never reached its writes"
        monkeypatch.setattr(engine_class, "_write", write)  # host B writes as usual
        with monkeypatch.context() as expired:
            # A's lease has expired for B: A's renewals stopped while it was frozen.
            expired.setattr(LedgerLease, "_free", lambda self, config: True)
            summary_b = reconcile_b(host_b, now=NOW)
        written_by_b = read(ledger, ROOT_STATE)
    finally:
        wake.set()
        a.join(300)

    assert "error" in outcome, f"host A committed after losing its lease: {outcome}"
    assert "lease" in str(outcome["error"]).lower(), outcome["error"]
    # Nothing of A's landed: B's rows are the state, one per root, the reference's statuses.
    rows = read(ledger, ROOT_STATE)
    assert sorted(map(repr, rows)) == sorted(map(repr, written_by_b))
    assert len({row["root_id"] for row in rows}) == len(rows) == 30
    expected = {r: classify(f, now=NOW, timeout=TIMEOUT) for r, f in fold(events).items()}
    assert {row["root_id"]: row["status"] for row in rows} == expected
    assert summary_b["by_status"] == {"completed": 20, "timed_out": 10}

    # The next run, on either host, folds nothing again and changes nothing.
    again = reconcile_b(host_a, now=NOW)
    assert (again["events_read"], again["roots_updated"]) == (0, 0)
    assert sorted(map(repr, read(ledger, ROOT_STATE))) == sorted(map(repr, written_by_b))
