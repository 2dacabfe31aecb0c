"""Retention reads what changed since the last run, not every root the ledger keeps
(`ackfold.ledger.housekeeping.retention`): a run takes only the roots settled since the
last run's cut-off, never opening the files of the others, and a full pass once a week
takes an event that came after a run took its root."""

from __future__ import annotations

import itertools
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from deltalake import DeltaTable

from ackfold import LedgerWriter, Tracker
from ackfold.cli.maintain import describe
from ackfold.config import load_settings
from ackfold.ledger.housekeeping.retention import CUTOFF, FULL_CUTOFF, FULL_PASS_EVERY
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, Ledger
from ackfold.maintenance import run_maintenance
from ackfold.runs.reconcile import run_reconcile

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _clock(start: datetime) -> Tracker:
    ticks = (start + timedelta(seconds=i) for i in itertools.count())
    return Tracker("orders", clock=ticks.__next__)


def _events_by_root(writer: LedgerWriter) -> dict[int, int]:
    counts: dict[int, int] = {}
    for event in DeltaTable(writer.uri(ACK_EVENTS)).to_pyarrow_table().to_pylist():
        counts[event["root_id"]] = counts.get(event["root_id"], 0) + 1
    return counts


def test_a_run_takes_what_settled_since_the_last_and_a_weekly_full_pass_takes_the_rest(
    tmp_path: Path,
) -> None:
    settings = load_settings(var_dir=tmp_path)
    retention = settings.maintenance.retention
    writer = LedgerWriter(settings.table_root)
    tracker = _clock(T0)
    old = [tracker.spout(f"old{i}", source="sqs", source_queue="q", payload="p") for i in range(3)]
    for root in old:
        tracker.ack(root, stage="store")
    writer.append(tracker.drain_roots(), tracker.drain())
    run_reconcile(settings, now=T0 + timedelta(minutes=1))

    first = run_maintenance(settings, now=T0 + retention + timedelta(days=1))
    assert (first["retention_since"], first["roots_expired"]) == (None, 3), "a full pass"
    cutoff = T0 + timedelta(days=1)
    marks = DeltaTable(Ledger(settings.table_root).path(ROOT_STATE)).metadata().configuration
    assert (marks[CUTOFF], marks[FULL_CUTOFF]) == (cutoff.isoformat(), cutoff.isoformat())
    assert not set(_events_by_root(writer)) & {r.roots[0] for r in old}

    # An event of a root the run took, read again after its cut-off; and a root settled
    # since.
    again = _clock(cutoff + timedelta(hours=1))
    again.ack(old[0], stage="store")
    tracker = _clock(T0 + timedelta(days=2))
    new = tracker.spout("new", source="sqs", source_queue="q", payload="p")
    tracker.ack(new, stage="store")
    writer.append(tracker.drain_roots(), again.drain() + tracker.drain())
    run_reconcile(settings, now=T0 + timedelta(days=2, minutes=1))

    # The files of the roots the first run took are never opened by the next: moved away.
    state = Path(Ledger(settings.table_root).path(ROOT_STATE))
    taken = state / f"first_event_date={T0.date()}" / "status=completed"
    shutil.move(taken, tmp_path / "away")
    second = run_maintenance(settings, now=T0 + retention + timedelta(days=3))
    shutil.move(tmp_path / "away", taken)
    assert second["retention_since"] == cutoff.isoformat()
    assert f"(those changed since {cutoff.isoformat()})" in describe(second)
    assert second["roots_expired"] == 1, "only the root settled since"
    left = _events_by_root(writer)
    assert new.roots[0] not in left
    assert left.get(old[0].roots[0]) == 1, "the event read again waits for a full pass"

    third = run_maintenance(settings, now=cutoff + FULL_PASS_EVERY + retention)
    assert (third["retention_since"], third["roots_expired"]) == (None, 4), "a week on: full"
    assert old[0].roots[0] not in _events_by_root(writer)
