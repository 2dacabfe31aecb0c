"""The embedded reconcile on an object store: the ledger, the derived tables and the mark
of what was folded all on a real S3 API (`s3a://`, as Spark spells it), no JVM."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from deltalake import DeltaTable

from ackfold import LedgerWriter, Tracker
from ackfold.config import load_settings
from ackfold.ledger.schema.tables import ROOT_STATE, Ledger
from ackfold.ledger.storage.store import delta_uri, storage_options
from ackfold.reconcile.fold import classify, fold
from ackfold.runs.reconcile import run_reconcile
from tests.s3.conftest import warehouse_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from arrow_ledger import ArrowLedger


def _state(warehouse: str) -> dict[int, dict[str, object]]:
    uri = Ledger(warehouse).path(ROOT_STATE)
    table = DeltaTable(delta_uri(uri), storage_options=storage_options(uri))
    return {row["root_id"]: row for row in table.to_pyarrow_table().to_pylist()}


def test_an_embedded_reconcile_on_s3_folds_once_and_marks_what_it_folded(
    bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    warehouse = warehouse_of(bucket, "s3a")
    settings = load_settings(var_dir=tmp_path, warehouse=warehouse)
    synthetic = ArrowLedger(roots=500)
    writer = LedgerWriter(warehouse)
    synthetic.write(writer)
    now = synthetic.end + timedelta(hours=1)

    first = run_reconcile(settings, now=now, engine="embedded")
    assert first["engine"] == "embedded"
    assert first["by_status"] == synthetic.expected()
    assert first["events_read"] == first["events_folded"] > 0

    # New events of a tracked producer: only they are read by the next run.
    tracker = Tracker("webhooks", clock=lambda: now)
    hook = tracker.spout("evt-1")
    tracker.ack(hook, stage="store")
    events = tracker.drain()
    writer.append(tracker.drain_roots(), events)
    second = run_reconcile(settings, now=now, engine="embedded")
    assert second["events_read"] == len(events)
    (root,) = hook.roots
    row = _state(warehouse)[root]
    expected = fold(events)[root]
    assert row["status"] == classify(expected, now=now, timeout=timedelta(minutes=5))
    assert row["xor_acc"] == expected.xor_acc == 0
