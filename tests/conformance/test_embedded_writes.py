"""The embedded reconcile commits its derived tables through `LedgerWriter`, as every
ledger writer does: with its conflict retries and a checkpoint every 10th version, as
Spark's Delta writes it (delta-rs's own default is every 100th)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from ackfold import Tracker
from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.contract import INIT
from ackfold.ledger.schema.tables import ROOT_STATE, UNMATCHED_EVENTS, Ledger
from ackfold.runs.reconcile import run_reconcile
from tests.conformance.conftest import state, waiting
from tests.ledger_fixtures import Clock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_root_state_and_unmatched_events_checkpoint_every_tenth_version(
    tmp_path: Path,
) -> None:
    settings = load_settings(var_dir=tmp_path)
    writer = LedgerWriter(settings.table_root)
    writer.create()
    for run in range(10):
        # Each run: one root that completes (appended to root_state), and the ack of a
        # root whose init has not come (unmatched_events, written anew).
        tracker = Tracker("orders", clock=Clock(T0 + timedelta(minutes=run)))
        done = tracker.spout(f"done-{run}", source="sqs")
        tracker.ack(done, stage="store")
        early = tracker.spout(f"early-{run}", source="sqs")
        tracker.ack(early, stage="store")
        events = tracker.drain()
        orphan = [e for e in events if e["root_id"] == early.roots[0] and e["kind"] != INIT]
        kept = [e for e in events if e["root_id"] != early.roots[0]]
        roots = [r for r in tracker.drain_roots() if r["root_id"] != early.roots[0]]
        writer.append(roots, kept + orphan)
        run_reconcile(settings, now=T0 + timedelta(minutes=run + 1), engine="embedded")

    ledger = Ledger(settings.table_root)
    assert len(state(ledger)) == 10
    assert len(waiting(ledger)) == 10
    for table in (ROOT_STATE, UNMATCHED_EVENTS):
        log = Path(ledger.path(table)) / "_delta_log"
        assert f"{10:020d}.checkpoint.parquet" in {p.name for p in log.iterdir()}, table
