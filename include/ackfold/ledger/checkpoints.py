"""Checkpoints after a commit, at the table's interval, as Delta Spark writes them."""

from __future__ import annotations

from typing import Any


def checkpoint_at_interval(table: Any) -> None:
    """After a commit through `table` (a `DeltaTable` at the version it committed):
    checkpoint every `delta.checkpointInterval` versions, 10 unless the table says
    otherwise, as Delta Spark does (delta-rs's own default is 100): readers, Spark's and
    delta-rs's, then replay at most that many commits. It takes delta-rs milliseconds."""
    interval = int(table.metadata().configuration.get("delta.checkpointInterval") or 10)
    if table.version() % interval == 0:
        table.create_checkpoint()
