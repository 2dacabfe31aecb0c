"""A ledger for maintenance tests, written with delta-rs (no JVM): roots settled long ago
and lately, one failed and one timed out of each, report rows old and new, a reconcile at
`NOW`, then appends no reconcile has folded yet. And what a test needs to look at
afterwards: the files on disk beside the files a table names, and the rows a correct
retention leaves (`expected_rows`, the reference both engines are held to)."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from ackfold.config import Settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.contract import arrow_schema
from ackfold.ledger.schema.status import COMPLETED, COMPLETED_LATE
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    APP_PROGRESS,
    QUALITY_RESULTS,
    REPLAY_LOG,
    ROOT_STATE,
    SENT_MESSAGES,
    TABLES,
    Ledger,
)
from ackfold.runs.reconcile import run_reconcile
from ackfold.track.tracker import Tracker

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=40)


def row(name: str, **values: Any) -> pa.Table:
    """One row of ledger table `name`: `values`, the rest filled in."""
    schema = arrow_schema(name)
    wanted = [f for f in schema if f.name in values or not f.nullable]
    filled = {f.name: values.get(f.name, _filler(f.type)) for f in wanted}
    return pa.Table.from_pylist([filled], schema=schema)


def _filler(kind: pa.DataType) -> Any:
    if pa.types.is_timestamp(kind):
        return T0
    if pa.types.is_date(kind):
        return T0.date()
    if pa.types.is_boolean(kind):
        return False
    if pa.types.is_integer(kind):
        return 1
    if pa.types.is_list(kind):
        return []
    return "x"


def write_ledger(settings: Settings) -> None:
    """Roots settled long ago and lately (each reconciled an hour after it started), one
    failed and one timed out of each, reports old and new, a reconcile at NOW, then
    appends it has not folded."""
    writer = LedgerWriter(settings.table_root)
    writer.create()
    for label, start in (("old", T0), ("recent", NOW - timedelta(days=1))):
        ticks = (start + timedelta(seconds=i) for i in itertools.count())
        tracker = Tracker("orders", clock=ticks.__next__)
        for n in range(3):
            root = tracker.spout(f"{label}-{n}", source="sqs", source_queue="q", payload="p")
            child = tracker.emit([root], stage="split")
            tracker.ack(root, stage="split")
            tracker.ack(child, stage="store")
        failed = tracker.spout(f"{label}-bad", source="sqs", source_queue="q", payload="p")
        tracker.fail(failed, stage="split", reason="poison")
        # Its child never acked: timed out at the reconcile an hour later (timeout 5 min).
        stuck = tracker.spout(f"{label}-stuck", source="sqs", source_queue="q", payload="p")
        tracker.emit([stuck], stage="split")
        tracker.ack(stuck, stage="split")
        writer.append(tracker.drain_roots(), tracker.drain())
        run_reconcile(settings, now=start + timedelta(hours=1), engine="embedded")
    for at in (T0, NOW - timedelta(days=1)):
        writer.append_arrow(SENT_MESSAGES, row(SENT_MESSAGES, sent_at=at))
        writer.append_arrow(QUALITY_RESULTS, row(QUALITY_RESULTS, run_at=at, window_start=at))
        writer.append_arrow(APP_PROGRESS, row(APP_PROGRESS, recorded_at=at))
        writer.append_arrow(REPLAY_LOG, row(REPLAY_LOG, planned_at=at, root_id=int(at.timestamp())))
    run_reconcile(settings, now=NOW, engine="embedded")
    tracker = Tracker("orders", clock=lambda: NOW)
    for n in range(2):  # after the mark: not folded when maintenance runs
        late = tracker.spout(f"late-{n}", source="sqs", source_queue="q", payload="p")
        tracker.ack(late, stage="store")
        writer.append(tracker.drain_roots(), tracker.drain())


def no_retention(settings: Settings) -> Settings:
    """`settings` whose VACUUM keeps nothing (the setting refuses less than 7 days)."""
    maintenance = settings.maintenance.model_copy(update={"vacuum_retention": timedelta(0)})
    return settings.model_copy(update={"maintenance": maintenance})


def read(ledger: Ledger, name: str) -> list[dict[str, Any]]:
    table = DeltaTable(ledger.path(name))
    rows: list[dict[str, Any]] = pa.table(table.to_pyarrow_dataset().to_table()).to_pylist()
    return rows


def rows_of(ledger: Ledger, name: str) -> list[str]:
    """The rows of table `name`, comparable across ledgers (sorted reprs)."""
    return sorted(repr(sorted(r.items())) for r in read(ledger, name))


def expected_rows(ledger: Ledger, name: str, now: datetime, settings: Settings) -> list[str]:
    """The rows of table `name` that a correct maintenance at `now` leaves, from the rows
    it holds before: the reference, computed in plain Python.
    - `ack_events`: less the events older than the cut-off of the roots settled
      (`completed`, `completed_late`) before it, whose last event came before it;
    - the report tables: less the rows older than their cut-off;
    - every other table: as it is."""
    cutoff = now - settings.maintenance.retention
    rows = read(ledger, name)
    if name == ACK_EVENTS:
        settled = {
            r["root_id"]
            for r in read(ledger, ROOT_STATE)
            if r["status"] in (COMPLETED, COMPLETED_LATE)
            and r["status_changed_at"] < cutoff
            and r["last_event_at"] < cutoff
            and r["first_event_date"] < cutoff.date()
        }
        rows = [r for r in rows if not (r["root_id"] in settled and r["event_time"] < cutoff)]
    olds = {
        SENT_MESSAGES: ("sent_at", cutoff),
        QUALITY_RESULTS: ("run_at", cutoff),
        APP_PROGRESS: ("recorded_at", now - settings.maintenance.progress_retention),
    }
    if name in olds:
        column, before = olds[name]
        rows = [r for r in rows if not r[column] < before]
    return sorted(repr(sorted(r.items())) for r in rows)


def files(ledger: Ledger, name: str) -> tuple[dict[str, int], set[str]]:
    """(the data files on disk with their sizes, the files the table names) of `name`,
    by their paths inside the table."""
    path = Path(ledger.path(name))
    on_disk = {
        str(p.relative_to(path)): p.stat().st_size
        for p in path.rglob("*.parquet")
        if "_delta_log" not in p.parts
    }
    uris = DeltaTable(str(path)).file_uris()  # file:// URIs or plain paths, by version
    named = {str(Path(uri.removeprefix("file://")).relative_to(path)) for uri in uris}
    return on_disk, named


def added_since(ledger: Ledger, name: str, version: int) -> set[str]:
    """The names of the files table `name`'s commits from `version` on added."""
    return {Path(path).name for path in added_files(ledger, name, version)}


def added_files(ledger: Ledger, name: str, version: int) -> dict[str, int]:
    """The files table `name`'s commits from `version` on added, with their sizes, by
    their paths inside the table."""
    table = DeltaTable(ledger.path(name))
    added = {}
    for v in range(version, table.version() + 1):
        log = Path(ledger.path(name)) / "_delta_log" / f"{v:020d}.json"
        actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        added |= {a["add"]["path"]: int(a["add"]["size"]) for a in actions if "add" in a}
    return added


class DiskAtVacuum:
    """A `progress` for `run_maintenance` that lists each table's data files on disk as
    the vacuum step starts and as it ends: `gone[name]`, the files (with their sizes) that
    left the disk in between, is what VACUUM deleted, whichever engine ran it (a file an
    earlier step wrote and committed nothing about, such as the empty file of a Spark
    DELETE that removed every row of its input, included)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.said: list[str] = []
        self.before: dict[str, dict[str, int]] = {}
        self.gone: dict[str, dict[str, int]] = {}

    def __call__(self, text: str) -> None:
        self.said.append(text)
        if text.startswith("maintenance: vacuum ("):
            self.before = {name: files(self.ledger, name)[0] for name in TABLES}
        elif text.startswith("maintenance: vacuum done"):
            for name, before in self.before.items():
                after = files(self.ledger, name)[0]
                self.gone[name] = {p: size for p, size in before.items() if p not in after}
