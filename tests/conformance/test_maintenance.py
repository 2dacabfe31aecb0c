"""Maintenance on every engine, through `run_maintenance`, against a reference: the
embedded engine (delta-rs steps, no JVM, the same as on every object store) and Spark
(its own steps on a local warehouse, on the worker's session) each maintain a ledger at
`NOW`, and must leave the rows the plain-Python reference says
(`tests.maintenance_ledger.expected_rows`: old roots failed or timed out keep every
event), reader version 1, every commit carrying the run's lease epoch, files rewritten in
the ledger's codec (the Spark session's own codec as it was), one retention MERGE and one
Z-order in `ack_events`' history, a summary whose files and bytes are what left the disk,
a ledger that reconciles afterwards as one never maintained, and a run the next day that
reads only the roots changed since the first run's cut-off (`root_state`'s properties).

The ledger has appends that no reconcile folded yet, rewritten by the Z-order. It is
vacuumed with no retention at all: the run keeps the files of those appends (they are not
folded), and deletes every other file the tables no longer name."""

from __future__ import annotations

import logging
import re
import shutil
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from ackfold.config import load_settings
from ackfold.ledger.commits.fence import FENCE_APP, STRIDE
from ackfold.ledger.commits.lease import ledger_turn
from ackfold.ledger.commits.marks import unfolded_since
from ackfold.ledger.housekeeping.maintenance import expire_events
from ackfold.ledger.housekeeping.retention import CUTOFF, FULL_CUTOFF
from ackfold.ledger.housekeeping.store_maintenance import RETENTION_PROPERTY, SETTLED, STEPS
from ackfold.ledger.schema.status import FAILED, TIMED_OUT
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    APP_PROGRESS,
    QUALITY_RESULTS,
    ROOT_STATE,
    SENT_MESSAGES,
    TABLES,
    Ledger,
)
from ackfold.maintenance import run_maintenance
from ackfold.runs.reconcile import run_reconcile
from tests.conformance.conftest import Reconcile, state
from tests.conftest import JARS_DIR
from tests.maintenance_ledger import (
    NOW,
    DiskAtVacuum,
    added_since,
    expected_rows,
    files,
    no_retention,
    read,
    rows_of,
    write_ledger,
)

RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
CODEC = "spark.sql.parquet.compression.codec"
# What a reconcile keeps per root; the rest of a root_state row (its marks) may differ
# between a ledger maintained and one not (maintenance commits versions of its own).
KEPT = ("app", "status", "xor_acc", "event_count", "attempt", "origin_root_id", "last_stage")


def test_maintenance_leaves_what_the_reference_says(
    request: pytest.FixtureRequest,
    engine: str,
    reconcile: Reconcile,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_ledger(load_settings(var_dir=tmp_path / "made", jars_dir=JARS_DIR))
    shutil.copytree(tmp_path / "made", tmp_path / "untouched")
    settings = no_retention(load_settings(var_dir=tmp_path / "made", jars_dir=JARS_DIR))
    ledger = Ledger(settings.table_root)
    expected = {name: expected_rows(ledger, name, NOW, settings) for name in TABLES}
    events_before = len(read(ledger, ACK_EVENTS))
    unfolded = unfolded_since(ledger)
    assert unfolded is not None, "the late appends are not folded"
    added = added_since(ledger, ACK_EVENTS, unfolded[0])
    disk = DiskAtVacuum(ledger)
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    codec = spark.conf.get(CODEC) if spark is not None else None
    # Roots long past the cut-off that are not settled keep every event.
    cutoff = NOW - settings.maintenance.retention
    unsettled = {
        root: row["status"]
        for root, row in state(ledger).items()
        if row["status"] not in SETTLED and row["last_event_at"] < cutoff
    }
    assert sorted(unsettled.values()) == [FAILED, TIMED_OUT]
    events_of = Counter(e["root_id"] for e in read(ledger, ACK_EVENTS) if e["root_id"] in unsettled)

    def maintain(at: datetime, **how: Any) -> dict[str, Any]:
        if spark is not None:
            spark.conf.set(RETENTION_CHECK, "false")  # VACUUM that keeps nothing
        try:
            return run_maintenance(settings, engine=engine, spark=spark, now=at, **how)
        finally:
            if spark is not None:
                spark.conf.unset(RETENTION_CHECK)

    with caplog.at_level(logging.INFO, logger="ackfold.maintenance"):
        summary = maintain(NOW, progress=disk)
    assert "not folded by a reconcile yet" in caplog.text
    caplog.clear()
    if spark is not None:  # the ledger's codec was the run's, not left on the session
        assert spark.conf.get(CODEC) == codec

    assert summary["engine"] == engine
    assert summary["protocol"] == ("spark" if engine == "spark" else "delta-rs")
    assert summary["roots_expired"] == 3
    assert summary["events_deleted"] == events_before - len(expected[ACK_EVENTS]) > 0
    assert summary["reports_deleted"] == {SENT_MESSAGES: 1, QUALITY_RESULTS: 1, APP_PROGRESS: 1}
    assert list(summary["seconds_by_step"]) == list(STEPS)
    assert summary["checkpointed"] == summary["vacuumed"] == list(TABLES)
    for name in TABLES:
        assert rows_of(ledger, name) == expected[name], name
        table = DeltaTable(ledger.path(name))
        assert table.protocol().min_reader_version == 1, name
        # The claim, and every commit of the run after it, carry the run's epoch.
        version = table.transaction_version(FENCE_APP)
        assert version is not None, name
        assert version // STRIDE == summary["epoch"], name
        retention = table.metadata().configuration.get(RETENTION_PROPERTY)
        if name == ACK_EVENTS:  # back to the first commit no reconcile has folded
            assert re.fullmatch(r"interval [1-9]\d* hours", retention or ""), retention
        else:
            assert retention == "interval 0 hours", name
        on_disk, named = files(ledger, name)
        if name == ACK_EVENTS:  # the unfolded appends' files stay, rewritten or not
            assert added <= {Path(p).name for p in on_disk}, "an unfolded file was vacuumed"
            assert added.isdisjoint(Path(p).name for p in named), "the Z-order kept them"
        else:
            assert set(on_disk) == named, f"{name}: files the table no longer names are left"
        # What the summary says VACUUM deleted is what left the disk.
        left = disk.gone[name]
        assert summary["removed"][name] == {"files": len(left), "bytes": sum(left.values())}
    assert summary["files_removed"] > 0
    kept_events = Counter(e["root_id"] for e in read(ledger, ACK_EVENTS))
    assert {root: kept_events[root] for root in unsettled} == events_of
    # Every file the Z-order wrote is in the ledger's codec (`ackfold.ledger.schema.encoding`).
    _, named = files(ledger, ACK_EVENTS)
    assert named
    assert all(name.endswith(".zstd.parquet") for name in named), named
    history = DeltaTable(ledger.path(ACK_EVENTS)).history()
    assert "MERGE" in [commit["operation"] for commit in history], "the retention delete"
    (zorder,) = [commit for commit in history if commit["operation"] == "OPTIMIZE"]
    if engine == "spark":  # delta-rs's z_order names no columns in its commit
        assert "root_id" in zorder["operationParameters"]["zOrderBy"]

    # Afterwards the ledger reconciles, from the mark and reading the kept files, as one
    # that was never maintained. That one is the reference, folded by the embedded engine
    # on either run: the engines fold alike (invariant 15), and it needs no second Spark run.
    later = NOW + timedelta(hours=1)
    untouched = load_settings(var_dir=tmp_path / "untouched", jars_dir=JARS_DIR)
    with caplog.at_level(logging.WARNING):
        after = [
            reconcile(settings, now=later),
            run_reconcile(untouched, now=later, engine="embedded"),
        ]
    assert "whole table" not in caplog.text
    assert after[0]["events_read"] == after[1]["events_read"] == 4
    assert after[0]["by_status"] == after[1]["by_status"]
    kept = [
        {root: tuple(row[key] for key in KEPT) for root, row in state(Ledger(s.table_root)).items()}
        for s in (settings, untouched)
    ]
    assert kept[0] == kept[1]

    # The run kept its cut-off in root_state's properties; the next day's reads only the
    # roots changed since (none), where a full pass would take the 3 old ones again.
    marks = DeltaTable(ledger.path(ROOT_STATE)).metadata().configuration
    assert marks[CUTOFF] == marks[FULL_CUTOFF] == cutoff.isoformat()
    # On Spark, the retention step alone (its own Spark read of what changed): the whole
    # run again is fifteen more VACUUMs of about 26 Spark jobs each, tested above.
    if spark is None:
        next_day = maintain(NOW + timedelta(days=1))
    else:
        with ledger_turn(settings, "maintenance") as fence:
            fence.claim([ledger.path(ROOT_STATE), ledger.path(ACK_EVENTS)])
            next_day = expire_events(spark, settings, now=NOW + timedelta(days=1))
    assert (next_day["retention_since"], next_day["roots_expired"]) == (cutoff.isoformat(), 0)
    assert DeltaTable(ledger.path(ROOT_STATE)).metadata().configuration[CUTOFF] == (
        (cutoff + timedelta(days=1)).isoformat()
    )
