"""The mark of what was folded lives in `root_state` on every store
(`ackfold.ledger.commits.marks`):
on a real S3 API an engine switch starts from it, and a run with nothing to do is told so
without an engine, as on a local disk. (Spark itself cannot read `s3a://` here, without
the S3A jars: `docs/decisions/object-stores.md`; it plans its reads with the same call.)"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from ackfold import LedgerWriter, Tracker
from ackfold.config import load_settings
from ackfold.ledger.commits.marks import events_table, read_mark
from ackfold.ledger.schema.tables import Ledger
from ackfold.reconcile.new_events import new_events
from ackfold.runs.reconcile import run_reconcile
from tests.s3.conftest import warehouse_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from arrow_ledger import ArrowLedger


def test_an_engine_switch_on_s3_starts_from_the_mark_in_root_state(
    bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    warehouse = warehouse_of(bucket, "s3a")
    settings = load_settings(var_dir=tmp_path, warehouse=warehouse)
    ledger = Ledger(warehouse)
    synthetic = ArrowLedger(roots=300)
    synthetic.write(LedgerWriter(warehouse))
    now = synthetic.end + timedelta(hours=1)
    first = run_reconcile(settings, now=now, engine="embedded")
    assert first["by_status"] == {k: n for k, n in synthetic.expected().items() if n}

    events = events_table(ledger)
    assert read_mark(ledger, None, str(events.metadata().id)) == events.version()
    # What either engine reads next, from the shared mark: nothing.
    appends, mark = new_events(ledger, None)
    assert (mark, appends.files, appends.whole) == (events.version(), (), False)
    again = run_reconcile(settings, now=now, engine="spark")
    assert again["engine"] == "quiet", "nothing new and no timeout due: no engine starts"
    assert again["by_status"] == first["by_status"]

    # A producer's new roots: only their files are read, by whichever engine comes next.
    tracker = Tracker("webhooks", clock=lambda: now)
    tracker.ack(tracker.spout("evt-1"), stage="store")
    LedgerWriter(warehouse).append(tracker.drain_roots(), tracker.drain())
    appends, mark = new_events(ledger, None)
    assert mark == events.version()
    assert (len(appends.files), appends.whole) == (1, False)
    assert {f.version for f in appends.files} == {events.version() + 1}
