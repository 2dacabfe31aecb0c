"""Checkpoints after a commit, at the table's interval, as Delta Spark writes them."""

from __future__ import annotations

import logging
from typing import Any

from deltalake.exceptions import DeltaError

log = logging.getLogger("ackfold.ledger.storage.checkpoints")


def checkpoint_at_interval(table: Any) -> None:
    """After a commit through `table` (a `DeltaTable` at the version it committed):
    checkpoint every `delta.checkpointInterval` versions, 10 unless the table says
    otherwise, as Delta Spark does (delta-rs's own default is 100): readers, Spark's and
    delta-rs's, then replay at most that many commits. It takes delta-rs milliseconds.

    A checkpoint the store refuses (down a moment, or a file in its way) is logged, not
    raised: the commit has landed, and a writer told otherwise would take its batch for
    lost. Readers replay the
    commits since the last checkpoint, and the next interval's writes one; Delta Spark
    also only logs a failed checkpoint."""
    interval = int(table.metadata().configuration.get("delta.checkpointInterval") or 10)
    version = table.version()
    if version % interval == 0:
        try:
            table.create_checkpoint()
        # delta-rs raises OSError or DeltaError for the same store refusal, by where it met it.
        except (OSError, DeltaError) as exc:
            log.warning("no checkpoint at version %d (the commit stands): %s", version, exc)
