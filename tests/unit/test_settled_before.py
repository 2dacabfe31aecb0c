"""`settled_before` (the roots a step would park that settled before its window) reads
root_state whatever wrote its files. delta-rs's MERGE (the embedded reconcile's
`merge_updates`) writes its string columns as Arrow `string_view`, ackfold's own appends
as `string`; a dataset filter on `app` met both in one table and Arrow refused to compare
them: every `--app` reconcile that had copies to drop failed, found by the year soak at
its second month (issue 55)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq

from ackfold import Tracker
from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import ROOT_STATE, Ledger
from ackfold.reconcile.state import settled_before
from ackfold.runs.reconcile import run_reconcile
from tests.conftest import JARS_DIR

T0 = datetime(2027, 1, 4, 9, tzinfo=UTC)


def test_an_apps_settled_roots_are_found_in_files_merged_by_delta_rs(tmp_path: Path) -> None:
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    writer = LedgerWriter(settings.table_root)
    trackers = {app: Tracker(app, clock=lambda: T0) for app in ("orders", "billing")}
    roots = {app: [t.spout(f"{app}-{n}") for n in range(3)] for app, t in trackers.items()}
    for tracker in trackers.values():
        writer.append(tracker.drain_roots(), tracker.drain())
    run_reconcile(settings, now=T0 + timedelta(minutes=1), engine="embedded")  # pending
    for app, tracker in trackers.items():
        for root in roots[app]:
            tracker.ack(root, stage="store")
        writer.append(tracker.drain_roots(), tracker.drain())
    run_reconcile(settings, now=T0 + timedelta(hours=2), engine="embedded")  # MERGEd

    table = Path(settings.table_root) / ROOT_STATE
    kinds = {str(pq.read_schema(f).field("app").type) for f in table.rglob("part-*.parquet")}
    assert kinds == {"string", "string_view"}, kinds  # what made the filter fail
    ledger = Ledger(settings.table_root)
    ids = {root.roots[0] for app in roots for root in roots[app]}
    day = T0.date() + timedelta(days=1)
    orders = {root.roots[0] for root in roots["orders"]}
    assert settled_before(ledger, ids, day, "orders") == orders
    assert settled_before(ledger, ids, day) == ids
    assert settled_before(ledger, ids, T0.date(), "orders") == set()
