"""Maintenance without a JVM (`ackfold_maintenance` on the embedded engine): retention,
compaction and VACUUM in delta-rs on a local warehouse, and the ledger reconciles as
before afterwards."""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from ackfold import LedgerWriter, Tracker
from ackfold.config import load_settings
from ackfold.ledger.commits.fence import COMMIT_HOOKS
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.errors import LeaseLost
from ackfold.ledger.housekeeping.store_maintenance import full_vacuum
from ackfold.ledger.schema.tables import ACK_EVENTS, TABLES, Ledger
from ackfold.maintenance import plan_maintenance, run_maintenance
from ackfold.runs.reconcile import run_reconcile
from ackfold.track.heartbeat import ledger_write, progress_row

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_maintenance_without_spark_expires_only_long_completed_roots(tmp_path: Path) -> None:
    settings = load_settings(var_dir=tmp_path)
    ticks = (T0 + timedelta(seconds=i) for i in itertools.count())
    tracker = Tracker("orders", clock=ticks.__next__)
    done = [tracker.spout(f"ok{i}", source="sqs", source_queue="q", payload="p") for i in range(3)]
    for root in done:
        tracker.ack(root, stage="store")
    open_root = tracker.spout("open", source="sqs", source_queue="q", payload="p")
    tracker.emit([open_root], stage="split")  # a child never acked: never completes
    writer = LedgerWriter(settings.table_root)
    writer.append(tracker.drain_roots(), tracker.drain(), app_id="orders", version=1)
    # Two heartbeats: one older than `maintenance.progress_retention` at `later`, one not.
    later = T0 + settings.maintenance.retention + timedelta(days=1)
    old_beat = later - settings.maintenance.progress_retention - timedelta(hours=1)
    beat = ledger_write(settings)
    beat([
        {**progress_row("orders", "q1", "r1", None, 0, at), "recorded_at": at}
        for at in (old_beat, later)
    ])  # fmt: skip
    before = run_reconcile(settings, now=T0 + timedelta(minutes=1))["by_status"]
    assert before == {"completed": 3, "pending": 1}

    summary = run_maintenance(settings, now=later)

    assert (summary["protocol"], summary["roots_expired"]) == ("delta-rs", 3)
    events = DeltaTable(writer.uri("ack_events")).to_pyarrow_table().to_pylist()
    assert {event["root_id"] for event in events} == set(open_root.roots)
    assert "ack_events" in summary["optimized"]
    # Z-ordered in the ledger's encoding (`ackfold.ledger.schema.encoding`): Zstandard, no
    # dictionary of event ids.
    for path in DeltaTable(writer.uri("ack_events")).file_uris():
        chunk = pq.ParquetFile(path.removeprefix("file://")).metadata.row_group(0).column(0)
        assert (chunk.path_in_schema, chunk.compression) == ("event_id", "ZSTD")
        assert not chunk.has_dictionary_page
    assert "ack_events" in summary["vacuumed"]
    assert summary["reports_deleted"]["app_progress"] == 1
    beats = DeltaTable(writer.uri("app_progress")).to_pyarrow_table().to_pylist()
    assert [row["recorded_at"] for row in beats] == [later]
    # The roots' states stay; a reconcile afterwards folds nothing twice.
    after = run_reconcile(settings, now=later)
    assert after["events_read"] == 0
    assert after["by_status"]["completed"] == 3


def test_maintenance_frozen_past_its_lease_commits_nothing_more(tmp_path: Path) -> None:
    """Issue 55: maintenance committed without the epoch, so a run frozen after reading
    which roots had settled could wake and delete events after another host took over.
    Now its retention MERGE is refused, and no later step (OPTIMIZE, ALTER, VACUUM, log
    cleanup) runs."""
    settings = load_settings(var_dir=tmp_path)
    tracker = Tracker("orders", clock=lambda: T0)
    for i in range(3):
        tracker.ack(tracker.spout(f"ok{i}", source="sqs", source_queue="q"), stage="store")
    writer = LedgerWriter(settings.table_root)
    writer.append(tracker.drain_roots(), tracker.drain(), app_id="orders", version=1)
    assert run_reconcile(settings, now=T0 + timedelta(minutes=1))["by_status"] == {"completed": 3}
    later = T0 + settings.maintenance.retention + timedelta(days=1)
    events = Ledger(settings.table_root).path(ACK_EVENTS)
    seen: list[str] = []
    versions: dict[str, int] = {}

    def freeze_then_wake(path: str, moment: str) -> None:
        if path != events or moment != "before" or len(seen) == 2:
            return  # after the second: the newer run's claim passes here too
        seen.append(path)
        if len(seen) == 2:  # its retention MERGE (after its claim): frozen past its lease
            ahead = LedgerLease(
                settings.table_root, clock=lambda: datetime.now(UTC) + timedelta(hours=1)
            )
            with ahead.held("maintenance on another host") as newer:
                newer.claim([events])
            for name in TABLES:
                versions[name] = DeltaTable(writer.uri(name)).version()

    kept = DeltaTable(events).to_pyarrow_table().num_rows
    COMMIT_HOOKS.append(freeze_then_wake)
    try:
        with pytest.raises(LeaseLost, match="lost the ledger's lease to a newer run"):
            run_maintenance(settings, now=later)
    finally:
        COMMIT_HOOKS.remove(freeze_then_wake)
    assert len(seen) == 2, "the retention MERGE was a fenced commit"
    assert DeltaTable(events).to_pyarrow_table().num_rows == kept == 6, "no event deleted"
    assert {name: DeltaTable(writer.uri(name)).version() for name in TABLES} == versions


def test_the_log_helpers_doctests() -> None:
    import doctest

    from ackfold.ledger.housekeeping import delta_logs

    result = doctest.testmod(delta_logs)
    assert result.attempted
    assert result.failed == 0


def test_maintenance_compacts_root_states_small_files(tmp_path: Path) -> None:
    settings = load_settings(var_dir=tmp_path)
    ticks = (T0 + timedelta(seconds=i) for i in itertools.count())
    tracker = Tracker("orders", clock=ticks.__next__)
    writer = LedgerWriter(settings.table_root)
    for run in range(3):  # each reconcile adds its roots' states in a file of their own
        root = tracker.spout(f"m{run}", source="sqs", source_queue="q", payload="p")
        tracker.ack(root, stage="store")
        writer.append(tracker.drain_roots(), tracker.drain(), app_id="orders", version=run + 1)
        run_reconcile(settings, now=T0 + timedelta(minutes=run + 1))
    state = Ledger(settings.table_root).path("root_state")

    def files_by_partition() -> dict[str, int]:
        paths = DeltaTable(state).file_uris()
        return {part: sum(p.rsplit("/", 1)[0] == part for p in paths)
                for part in {p.rsplit("/", 1)[0] for p in paths}}  # fmt: skip

    assert max(files_by_partition().values()) >= 3
    before = DeltaTable(state).to_pyarrow_table().sort_by("root_id")

    summary = run_maintenance(settings, now=T0 + timedelta(hours=1))

    assert "root_state" in summary["optimized"]
    assert set(files_by_partition().values()) == {1}
    assert DeltaTable(state).to_pyarrow_table().sort_by("root_id").equals(before)


def test_vacuum_deletes_the_files_no_version_names_once_past_the_retention(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Files the log no longer records (a killed writer's, or removed longer ago than the
    checkpoints keep) go once older than `maintenance.vacuum_retention`, as in Spark's
    VACUUM; a younger one (a running writer's, not committed yet) stays."""
    settings = load_settings(var_dir=tmp_path)
    tracker = Tracker("orders", clock=lambda: T0)
    root = tracker.spout("m", source="sqs", source_queue="q", payload="p")
    tracker.ack(root, stage="store")
    LedgerWriter(settings.table_root).append(
        tracker.drain_roots(), tracker.drain(), app_id="orders", version=1
    )
    run_reconcile(settings, now=T0 + timedelta(minutes=1))
    state = Path(Ledger(settings.table_root).path("root_state"))
    (live,) = DeltaTable(str(state)).file_uris()
    partition = Path(live.removeprefix("file://")).parent
    stranded, uncommitted = partition / "part-stranded.parquet", partition / "part-young.parquet"
    stranded.write_bytes(Path(live.removeprefix("file://")).read_bytes())
    uncommitted.write_bytes(stranded.read_bytes())
    old = datetime.now(UTC) - settings.maintenance.vacuum_retention - timedelta(days=1)
    os.utime(stranded, (old.timestamp(), old.timestamp()))
    later = T0 + timedelta(hours=1)
    planned = plan_maintenance(settings, now=later)["removed"]["root_state"]["files"]

    summary = run_maintenance(settings, now=later)

    assert uncommitted.exists()
    rows = DeltaTable(str(state)).to_pyarrow_table().to_pylist()
    assert [row["status"] for row in rows] == ["completed"]
    if full_vacuum():
        assert not stranded.exists()
        assert planned == summary["removed"]["root_state"]["files"] == 1
    else:  # deltalake 1.0 and 1.1: lite only, and said
        assert stranded.exists()
        assert planned == 0
        assert "full VACUUM would delete files younger than the retention" in caplog.text
