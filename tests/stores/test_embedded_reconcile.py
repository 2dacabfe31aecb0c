"""The embedded reconcile on GCS and ADLS: the ledger, the derived tables and the mark of
what was folded all on the store, no JVM."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from ackfold import LedgerWriter, Tracker
from ackfold.config import load_settings
from ackfold.runs.reconcile import run_reconcile

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from arrow_ledger import ArrowLedger


def test_an_embedded_reconcile_folds_once_and_marks_what_it_folded(
    warehouse: str, tmp_path: Path
) -> None:
    settings = load_settings(var_dir=tmp_path, warehouse=warehouse)
    synthetic = ArrowLedger(roots=300)
    writer = LedgerWriter(warehouse)
    synthetic.write(writer)
    now = synthetic.end + timedelta(hours=1)

    expected = {status: n for status, n in synthetic.expected().items() if n}
    first = run_reconcile(settings, now=now, engine="embedded")
    assert first["by_status"] == expected
    assert first["events_read"] == first["events_folded"] > 0

    tracker = Tracker("webhooks", clock=lambda: now)
    tracker.ack(tracker.spout("evt-1"), stage="store")
    events = tracker.drain()
    writer.append(tracker.drain_roots(), events)
    second = run_reconcile(settings, now=now, engine="embedded")
    assert second["events_read"] == len(events)
    assert second["by_status"]["completed"] == expected["completed"] + 1
    third = run_reconcile(settings, now=now, engine="embedded")
    assert third["events_read"] == 0
