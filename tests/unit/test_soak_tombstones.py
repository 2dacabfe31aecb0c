"""The soak's check on checkpoints (bench/soak.py): a tombstone older than its table's
`delta.deletedFileRetentionDuration` when the checkpoint was written is counted, a
younger one is not. Delta drops the old ones by the wall clock, which a soak's year never
reaches, so the soak checks that it does, beside the bytes it bounds."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable, write_deltalake

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from soak import _stale_tombstones


def _checkpoint_with_a_tombstone(path: Path) -> Path:
    rows = pa.table({"root_id": pa.array([1, 2], pa.int64())})
    write_deltalake(str(path), rows, configuration={
        "delta.deletedFileRetentionDuration": "interval 1 hours"
    })  # fmt: skip
    write_deltalake(str(path), rows, mode="overwrite")  # the first file's tombstone
    DeltaTable(str(path)).create_checkpoint()
    (checkpoint,) = (path / "_delta_log").glob("*.checkpoint.parquet")
    return checkpoint


def _stale(path: Path, checkpoint: Path) -> int:
    store = pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem())
    return _stale_tombstones(store, [store.get_file_info(str(checkpoint.relative_to(path)))])


def test_a_tombstone_within_its_retention_is_not_stale(tmp_path: Path) -> None:
    checkpoint = _checkpoint_with_a_tombstone(tmp_path)
    assert _stale(tmp_path, checkpoint) == 0


def test_a_tombstone_past_its_retention_is_counted(tmp_path: Path) -> None:
    checkpoint = _checkpoint_with_a_tombstone(tmp_path)
    later = checkpoint.stat().st_mtime + 3600 + 90  # written an hour and a half after
    os.utime(checkpoint, (later, later))
    assert _stale(tmp_path, checkpoint) == 1


def test_a_tombstone_just_past_its_retention_is_within_the_leeway(tmp_path: Path) -> None:
    checkpoint = _checkpoint_with_a_tombstone(tmp_path)
    later = checkpoint.stat().st_mtime + 3600 + 30  # the checkpoint's upload took a moment
    os.utime(checkpoint, (later, later))
    assert _stale(tmp_path, checkpoint) == 0
