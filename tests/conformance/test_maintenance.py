"""Maintenance on both engines leaves the same ledger: Spark's steps (a local warehouse
with a session) and delta-rs's (`store_maintenance`: no JVM, and every object store) run
on copies of one ledger at the same `now`, and the tables they leave must hold the same
rows, the same retention, reader version 1, and reconcile alike afterwards.

The copies have appends that no reconcile folded yet, rewritten by the Z-order. Both are
vacuumed with no retention at all: each keeps the files of those appends (they are not
folded), and deletes every other file the tables no longer name."""

from __future__ import annotations

import itertools
import logging
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from ackfold.config import Settings, load_settings
from ackfold.ledger.contract import arrow_schema
from ackfold.ledger.maintenance import maintain
from ackfold.ledger.marks import unfolded_since
from ackfold.ledger.store_maintenance import RETENTION_PROPERTY
from ackfold.ledger.tables import (
    ACK_EVENTS,
    APP_PROGRESS,
    QUALITY_RESULTS,
    REPLAY_LOG,
    SENT_MESSAGES,
    TABLES,
    Ledger,
)
from ackfold.ledger.writer import LedgerWriter
from ackfold.reconcile.run import run_reconcile
from ackfold.track.tracker import Tracker
from tests.conformance.conftest import read, state
from tests.conftest import JARS_DIR

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=40)
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def _rows(name: str, **values: Any) -> pa.Table:
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


def _ledger(settings: Settings) -> None:
    """Roots settled long ago and lately (each reconciled an hour after it started), one
    failed of each, reports old and new, a reconcile at NOW, then appends it has not
    folded."""
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
        writer.append(tracker.drain_roots(), tracker.drain())
        run_reconcile(settings, now=start + timedelta(hours=1), engine="embedded")
    for at in (T0, NOW - timedelta(days=1)):
        writer.append_arrow(SENT_MESSAGES, _rows(SENT_MESSAGES, sent_at=at))
        writer.append_arrow(QUALITY_RESULTS, _rows(QUALITY_RESULTS, run_at=at, window_start=at))
        writer.append_arrow(APP_PROGRESS, _rows(APP_PROGRESS, recorded_at=at))
        logged = _rows(REPLAY_LOG, planned_at=at, root_id=int(at.timestamp()))
        writer.append_arrow(REPLAY_LOG, logged)
    run_reconcile(settings, now=NOW, engine="embedded")
    tracker = Tracker("orders", clock=lambda: NOW)
    for n in range(2):  # after the mark: not folded when maintenance runs
        late = tracker.spout(f"late-{n}", source="sqs", source_queue="q", payload="p")
        tracker.ack(late, stage="store")
        writer.append(tracker.drain_roots(), tracker.drain())


def _no_retention(settings: Settings) -> Settings:
    """`settings` whose VACUUM keeps nothing (the setting refuses less than 7 days)."""
    maintenance = settings.maintenance.model_copy(update={"vacuum_retention": timedelta(0)})
    return settings.model_copy(update={"maintenance": maintenance})


def _rows_of(ledger: Ledger, name: str) -> list[str]:
    return sorted(repr(sorted(row.items())) for row in read(ledger, name))


def _files(ledger: Ledger, name: str) -> tuple[set[str], set[str]]:
    """(files on disk, files the table names) of table `name`."""
    path = Path(ledger.path(name))
    files = [p for p in path.rglob("*.parquet") if "_delta_log" not in p.parts]
    on_disk = {str(p.relative_to(path)) for p in files}
    uris = DeltaTable(str(path)).file_uris()  # file:// URIs or plain paths, by version
    named = {str(Path(uri.removeprefix("file://")).relative_to(path)) for uri in uris}
    return on_disk, named


@pytest.mark.parametrize("engine", ["spark"])  # the Spark run on the spark tier's JVM
def test_maintenance_leaves_the_same_tables_on_both_engines(
    request: pytest.FixtureRequest,
    engine: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    spark = request.getfixturevalue("spark")
    made = load_settings(var_dir=tmp_path / "made", jars_dir=JARS_DIR)
    _ledger(made)
    runs = {}
    for name in ("embedded", engine):
        shutil.copytree(tmp_path / "made", tmp_path / name)
        settings = _no_retention(load_settings(var_dir=tmp_path / name, jars_dir=JARS_DIR))
        ledger = Ledger(settings.table_root)
        unfolded = unfolded_since(ledger)
        assert unfolded is not None, "the late appends are not folded"
        added = {
            p.name for v in range(unfolded[0], DeltaTable(ledger.path(ACK_EVENTS)).version() + 1)
            for p in _added_by(ledger, v)
        }  # fmt: skip
        with caplog.at_level(logging.INFO, logger="ackfold.maintenance"):
            if name == "spark":
                spark.conf.set(RETENTION_CHECK, "false")
                try:
                    summary = maintain(spark, settings, now=NOW)
                finally:
                    spark.conf.unset(RETENTION_CHECK)
            else:
                summary = maintain(None, settings, now=NOW)
        assert "not folded by a reconcile yet" in caplog.text
        caplog.clear()
        runs[name] = (settings, ledger, summary, added)

    (one, first, done_one, added_one), (two, second, done_two, added_two) = runs.values()
    for key in ("roots_expired", "events_deleted", "reports_deleted", "optimized", "vacuumed"):
        assert done_one[key] == done_two[key], key
    assert done_one["roots_expired"] == 3
    assert done_one["reports_deleted"] == {SENT_MESSAGES: 1, QUALITY_RESULTS: 1, APP_PROGRESS: 1}
    for name in TABLES:
        assert _rows_of(first, name) == _rows_of(second, name), name
        tables = [DeltaTable(ledger.path(name)) for ledger in (first, second)]
        assert [t.protocol().min_reader_version for t in tables] == [1, 1], name
        properties = [t.metadata().configuration.get(RETENTION_PROPERTY) for t in tables]
        assert properties[0] == properties[1], name
        for ledger, added in ((first, added_one), (second, added_two)):
            on_disk, named = _files(ledger, name)
            if name == ACK_EVENTS:  # the unfolded appends' files stay, rewritten or not
                assert added <= {Path(p).name for p in on_disk}, "an unfolded file was vacuumed"
                assert added.isdisjoint(Path(p).name for p in named), "the Z-order kept them"
            else:
                assert on_disk == named, f"{name}: files the table no longer names are left"

    # Afterwards the ledger reconciles alike, from the mark, reading the kept files.
    with caplog.at_level(logging.WARNING):
        later = NOW + timedelta(hours=1)
        after = [run_reconcile(s, now=later, engine="embedded") for s in (one, two)]
    assert "whole table" not in caplog.text
    assert after[0]["by_status"] == after[1]["by_status"]
    assert after[0]["events_read"] == after[1]["events_read"] == 4
    assert state(first) == state(second)


def _added_by(ledger: Ledger, version: int) -> list[Path]:
    import json

    log = Path(ledger.path(ACK_EVENTS)) / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [Path(a["add"]["path"]) for a in actions if "add" in a]
