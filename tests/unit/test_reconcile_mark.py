"""The mark of what a reconcile folded (`ackfold.ledger.commits.marks`): a Delta transaction in
`root_state`, that only moves forward, carries the lease's epoch, is read the same way on
every store, and takes over an earlier ackfold's mark (its file, or Spark's stream
checkpoint) without folding anything again."""

from __future__ import annotations

import itertools
import json
import logging
import shutil
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path

import pytest
from deltalake import DeltaTable
from packaging.version import Version

from ackfold import Tracker, __version__
from ackfold.config import Settings, load_settings
from ackfold.ledger.commits import marks
from ackfold.ledger.commits.fence import FENCE_APP, STRIDE, Fence, holding
from ackfold.ledger.commits.lease import ledger_turn
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.errors import LeaseLost, SchemaMismatch
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, Ledger
from ackfold.reconcile.quiet import quiet_summary
from ackfold.runs.reconcile import run_reconcile
from tests.conftest import JARS_DIR

T0 = datetime(2026, 11, 27, tzinfo=UTC)
_EPOCHS = itertools.count(1)  # a run of its own, a newer epoch, for each `_mark`


def _ledger(tmp_path: Path) -> tuple[Ledger, str]:
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    LedgerWriter(settings.table_root).create()
    ledger = Ledger(settings.table_root)
    return ledger, str(DeltaTable(ledger.path(ACK_EVENTS)).metadata().id)


def _mark(ledger: Ledger, app: str | None, events_id: str, version: int) -> None:
    """`commit_mark` as a leased run makes it (a commit with no fence in force raises)."""
    with holding(Fence(ledger.root, epoch=next(_EPOCHS))):
        marks.commit_mark(ledger, app, events_id, version)


def _state_version(ledger: Ledger) -> int:
    return int(DeltaTable(ledger.path(ROOT_STATE)).version())


def test_the_mark_is_a_transaction_of_root_state_that_only_moves_forward(tmp_path: Path) -> None:
    ledger, events_id = _ledger(tmp_path)
    assert marks.read_mark(ledger, None, events_id) is None
    _mark(ledger, None, events_id, 7)
    _mark(ledger, "orders", events_id, 3)
    assert marks.read_mark(ledger, None, events_id) == 7
    assert marks.read_mark(ledger, "orders", events_id) == 3, "each scope its own"
    assert marks.read_mark(ledger, None, "another-table") is None
    app_id = marks.mark_app(None, events_id)
    assert DeltaTable(ledger.path(ROOT_STATE)).transaction_version(app_id) == 7

    before = _state_version(ledger)
    _mark(ledger, None, events_id, 5)  # behind: no commit at all
    _mark(ledger, None, events_id, 7)
    assert (_state_version(ledger), marks.read_mark(ledger, None, events_id)) == (before, 7)


def test_a_mark_carries_the_lease_epoch_and_a_lost_lease_cannot_move_it(tmp_path: Path) -> None:
    ledger, events_id = _ledger(tmp_path)
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    with ledger_turn(settings, "reconcile") as fence:
        marks.commit_mark(ledger, None, events_id, 4)
    held = DeltaTable(ledger.path(ROOT_STATE)).transaction_version(FENCE_APP)
    assert held is not None
    assert held // STRIDE == fence.epoch

    newer = Fence(ledger.root, epoch=fence.epoch + 1)
    newer.claim([ledger.path(ROOT_STATE)])
    stale = Fence(ledger.root, epoch=fence.epoch)
    with holding(stale), pytest.raises(LeaseLost, match=r"lease epoch \d+ \(this run's is \d+\)"):
        marks.commit_mark(ledger, None, events_id, 9)
    assert marks.read_mark(ledger, None, events_id) == 4


def test_an_earlier_ackfolds_mark_file_is_carried_on_not_folded_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A ledger an earlier ackfold reconciled up to version 2 of ack_events, then version 3
    appended: the next run reads version 3 only, and marks it in root_state."""
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    writer = LedgerWriter(settings.table_root)
    ledger = Ledger(settings.table_root)
    tracker = Tracker("orders", clock=lambda: T0)
    for n in range(3):
        root = tracker.spout(f"m{n}")
        tracker.ack(root, stage="store")
        writer.append(tracker.drain_roots(), tracker.drain())
    events = DeltaTable(ledger.path(ACK_EVENTS))
    checkpoint = Path(marks.reconcile_checkpoint(ledger, None))
    checkpoint.mkdir(parents=True)
    legacy = {"format": 1, "ack_events_id": events.metadata().id, "ack_events_version": 2}
    (checkpoint / marks.LEGACY_MARK).write_text(json.dumps(legacy))

    caplog.set_level(logging.INFO, logger="ackfold.ledger.commits.marks")
    summary = run_reconcile(settings, now=T0 + timedelta(minutes=1), engine="embedded")
    assert summary["events_read"] == 2, "only the root appended after the old mark"
    assert "carrying on from an earlier ackfold's mark" in caplog.text
    assert marks.read_mark(ledger, None, str(events.metadata().id)) == events.version()


def test_an_earlier_ackfolds_spark_checkpoint_gives_the_last_version_read_whole(
    tmp_path: Path,
) -> None:
    """Delta's streaming source's offsets, as Spark 4.1 with Delta 4.4 wrote them: the end
    of batch 1 is version 6 before its first file, so 5 was read whole; batch 2 was
    planned but never committed."""
    ledger, events_id = _ledger(tmp_path)
    checkpoint = Path(marks.reconcile_checkpoint(ledger, "orders"))
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()

    def offsets(batch: int, version: int, index: int, starting: bool = False) -> None:
        source = {
            "sourceVersion": 1, "reservoirId": events_id, "reservoirVersion": version,
            "index": index, "isStartingVersion": starting,
        }  # fmt: skip
        header = {"batchWatermarkMs": 0, "batchTimestampMs": 1795000000000, "conf": {}}
        text = f"v1\n{json.dumps(header)}\n{json.dumps(source)}"
        (checkpoint / "offsets" / str(batch)).write_text(text)

    offsets(0, 3, 2, starting=True)
    (checkpoint / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert marks.read_mark(ledger, "orders", events_id) is None, "within the first snapshot"
    offsets(1, 6, -1)
    (checkpoint / "commits" / "1").write_text('v1\n{"nextBatchWatermarkMs":0}')
    offsets(2, 9, -1)
    assert marks.read_mark(ledger, "orders", events_id) == 5
    assert marks.read_mark(ledger, "orders", "another-table") is None
    _mark(ledger, "orders", events_id, 8)
    assert marks.read_mark(ledger, "orders", events_id) == 8, "root_state's mark first"


def test_a_quiet_run_is_told_by_the_mark_and_a_damaged_state_goes_to_an_engine(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    ledger, events_id = _ledger(tmp_path)
    quiet = quiet_summary(settings, now=T0, since=T0.date(), app=None)
    assert quiet is None, "no mark yet"
    _mark(ledger, None, events_id, int(DeltaTable(ledger.path(ACK_EVENTS)).version()))
    quiet = quiet_summary(settings, now=T0, since=T0.date(), app=None)
    assert quiet == {
        "app": None, "now": T0.isoformat(), "events_read": 0, "events_folded": 0,
        "duplicates_dropped": 0, "roots_updated": 0, "unmatched_events": 0, "by_status": {},
    }  # fmt: skip

    caplog.set_level(logging.DEBUG, logger="ackfold.reconcile")
    log = Path(ledger.path(ROOT_STATE)) / "_delta_log"
    (log / f"{_state_version(ledger) + 1:020d}.json").write_text("{not json\n")
    assert quiet_summary(settings, now=T0, since=T0.date(), app=None) is None


def _earlier_ackfolds_ledger(tmp_path: Path) -> tuple[Settings, Ledger]:
    """A ledger whose root_state is as an earlier ackfold left it (partitioned by day
    alone, two more columns, every column nullable, as Spark's rewrite made it), with its
    mark file, and one root appended since."""
    import pyarrow as pa
    from deltalake import write_deltalake

    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    writer = LedgerWriter(settings.table_root)
    ledger = Ledger(settings.table_root)
    tracker = Tracker("orders", clock=lambda: T0)
    for n in range(2):
        tracker.ack(tracker.spout(f"m{n}"), stage="store")
        writer.append(tracker.drain_roots(), tracker.drain())
    run_reconcile(settings, now=T0 + timedelta(minutes=1), engine="embedded")
    current = DeltaTable(ledger.path(ROOT_STATE)).to_pyarrow_table()
    older = pa.table(
        [*current.columns, *(pa.nulls(current.num_rows, pa.string()) for _ in range(2))],
        schema=pa.schema(
            [f.with_nullable(True) for f in current.schema]
            + [pa.field("last_event_id", pa.string()), pa.field("fail_event_id", pa.string())]
        ),
    )
    shutil.rmtree(ledger.path(ROOT_STATE))  # made anew: no mark of this ackfold in it
    write_deltalake(ledger.path(ROOT_STATE), older, partition_by=["first_event_date"])
    events = DeltaTable(ledger.path(ACK_EVENTS))
    checkpoint = Path(marks.reconcile_checkpoint(ledger, None))
    checkpoint.mkdir(parents=True)
    legacy = {"format": 1, "ack_events_id": events.metadata().id}
    legacy["ack_events_version"] = events.version()
    (checkpoint / marks.LEGACY_MARK).write_text(json.dumps(legacy))
    tracker.ack(tracker.spout("m2"), stage="store")
    writer.append(tracker.drain_roots(), tracker.drain())
    return settings, ledger


# Repartitioning a table in one overwrite: deltalake 1.6 and later.
REPARTITIONS = Version(version("deltalake")) >= Version("1.6")


@pytest.mark.skipif(not REPARTITIONS, reason="this deltalake cannot repartition a table")
def test_an_earlier_ackfolds_root_state_is_brought_up_in_one_commit_by_either_engine(
    tmp_path: Path,
) -> None:
    """root_state as an earlier ackfold left it, and its mark file: the next reconcile
    (the embedded engine's here; the Spark engine calls the same upgrade) rewrites it in
    the current layout with its NOT NULLs, and folds only what is new."""
    import pyarrow as pa

    from ackfold.ledger.schema.contract import arrow_schema

    settings, ledger = _earlier_ackfolds_ledger(tmp_path)
    before = _state_version(ledger)
    summary = run_reconcile(settings, now=T0 + timedelta(minutes=2), engine="embedded")
    assert (summary["events_read"], summary["by_status"]) == (2, {"completed": 3})
    upgraded = DeltaTable(ledger.path(ROOT_STATE))
    assert upgraded.metadata().partition_columns == ["first_event_date", "status"]
    assert pa.schema(upgraded.schema().to_arrow()) == arrow_schema(ROOT_STATE)
    rewrites = [c for c in upgraded.history() if c["version"] > before]
    assert sum(c["operation"] == "WRITE" and "Overwrite" in str(c["operationParameters"])
               for c in rewrites) == 1, "in one commit"  # fmt: skip


@pytest.mark.skipif(REPARTITIONS, reason="this deltalake repartitions a table")
def test_a_deltalake_that_cannot_repartition_says_so_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """Before deltalake 1.6, an earlier ackfold's root_state cannot be brought up to date:
    the reconcile stops, naming the table, the version it needs and what to do, and leaves
    root_state's rows and layout as they were (run at the lowest end of ackfold's
    dependencies)."""
    settings, ledger = _earlier_ackfolds_ledger(tmp_path)
    rows = DeltaTable(ledger.path(ROOT_STATE)).to_pyarrow_table().sort_by("root_id")
    with pytest.raises(SchemaMismatch, match=r"root_state/? is partitioned .*\(1\.6 can\)") as e:
        run_reconcile(settings, now=T0 + timedelta(minutes=2), engine="embedded")
    # The fix the operations pages give (docs/operations/lease-and-maintenance.md), whole.
    assert (
        "Run one reconcile with deltalake 1.6 or later, in a virtualenv of its own where this "
        f"one's constraints hold deltalake back (pip install 'ackfold=={__version__}' "
        "'deltalake>=1.6'), with this deployment's settings: `ackfold reconcile`."
    ) in str(e.value)
    table = DeltaTable(ledger.path(ROOT_STATE))
    assert table.metadata().partition_columns == ["first_event_date"]
    assert table.to_pyarrow_table().sort_by("root_id").equals(rows)
