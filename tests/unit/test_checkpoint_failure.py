"""A checkpoint that fails after a commit fails no commit (`checkpoint_at_interval`): the
no-commit-lost run on Azurite (tests/stores) met one while the store restarted, and its
producer took a committed batch for failed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold.ledger.storage.checkpoints import checkpoint_at_interval


def _pointer_is_a_directory(log: Path) -> None:
    # delta-rs raises OSError when it cannot write the checkpoint's pointer
    (log / "_last_checkpoint").unlink()
    (log / "_last_checkpoint").mkdir()


def _checkpoint_is_a_directory(log: Path) -> None:
    # ... and DeltaError when it cannot write the checkpoint itself, as when GCS or Azurite
    # restarted under the no-commit-lost run in CI
    (log / "00000000000000000005.checkpoint.parquet").mkdir()


@pytest.mark.parametrize("refuse", [_pointer_is_a_directory, _checkpoint_is_a_directory])
def test_a_checkpoint_the_store_refuses_is_logged_and_the_commit_stands(
    refuse: Callable[[Path], None], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "table"
    rows = pa.table({"a": [1]})
    write_deltalake(path, rows, configuration={"delta.checkpointInterval": "5"})
    for _ in range(4):  # versions 1 to 4 (delta-rs checkpoints 4 itself)
        write_deltalake(path, rows, mode="append")
    write_deltalake(path, rows, mode="append")  # version 5: a checkpoint's turn
    refuse(path / "_delta_log")  # a directory in the way: the store refuses the write
    table = DeltaTable(path)
    with caplog.at_level(logging.WARNING, "ackfold.ledger.storage.checkpoints"):
        checkpoint_at_interval(table)
    (warned,) = [r.getMessage() for r in caplog.records]
    assert warned.startswith("no checkpoint at version 5 (the commit stands)")
    assert DeltaTable(path).version() == 5
    assert DeltaTable(path).to_pyarrow_table().num_rows == 6
