"""A checkpoint that fails after a commit fails no commit (`checkpoint_at_interval`): the
no-commit-lost run on Azurite (tests/stores) met one while the store restarted, and its
producer took a committed batch for failed."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold.ledger.storage.checkpoints import checkpoint_at_interval


def test_a_checkpoint_the_store_refuses_is_logged_and_the_commit_stands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "table"
    rows = pa.table({"a": [1]})
    write_deltalake(path, rows, configuration={"delta.checkpointInterval": "5"})
    for _ in range(4):  # versions 1 to 4 (delta-rs checkpoints 4 itself)
        write_deltalake(path, rows, mode="append")
    # A directory where the checkpoint's pointer goes: the store refuses its write.
    pointer = path / "_delta_log" / "_last_checkpoint"
    pointer.unlink()
    pointer.mkdir()
    write_deltalake(path, rows, mode="append")  # version 5: a checkpoint's turn
    table = DeltaTable(path)
    with caplog.at_level(logging.WARNING, "ackfold.ledger.storage.checkpoints"):
        checkpoint_at_interval(table)
    (warned,) = [r.getMessage() for r in caplog.records]
    assert warned.startswith("no checkpoint at version 5 (the commit stands)")
    assert DeltaTable(path).version() == 5
    assert DeltaTable(path).to_pyarrow_table().num_rows == 6
