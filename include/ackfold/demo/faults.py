"""Seeded fault injection, in Spark: which tuples a stage drops or fails, and kills.

Every decision is a hash of the seed and of what a tuple *is* (its sentence's sequence
number in the feed, the attempt, the word's position), never of SQS message ids or batch
boundaries. The same seed hits the same tuples on every run, and each attempt draws
again: a message dropped on its first attempt usually goes through on its replay.
The settings are `config.FaultSettings`.

Example:
    >>> from ackfold.config.demo import FaultSettings
    >>> hits = spark.range(1000).select(
    ...     hit(FaultSettings(drop={"split": 0.1}), "drop", "split", F.col("id")).alias("hit")
    ... ).where("hit").count()
    >>> 50 < hits < 150
    True
"""

from __future__ import annotations

import time

from pyspark.sql import Column
from pyspark.sql import functions as F

from ackfold.config.demo import FaultSettings
from ackfold.track import sql_ids

_SCALE = 1_000_000


class InjectedKill(RuntimeError):
    """Raised inside a micro-batch to kill its streaming query (fault injection)."""


def hit(faults: FaultSettings, kind: str, stage: str, *key: Column) -> Column:
    """True for the tuples that `kind` (`drop` or `fail`) hits at `stage`."""
    fraction = {"drop": faults.drop, "fail": faults.fail}[kind].get(stage, 0.0)
    if fraction <= 0:
        return F.lit(False)
    draw = sql_ids.hash64("fault", faults.seed, kind, stage, *key)
    return F.pmod(draw, F.lit(_SCALE)) < F.lit(round(fraction * _SCALE))


def be_slow(faults: FaultSettings, stage: str) -> None:
    """Sleep for the stage's `slow` delay, if any: once per micro-batch."""
    delay = faults.slow.get(stage)
    if delay is not None:
        time.sleep(delay.total_seconds())


class Killer:
    """Kills each stage named in `faults.kill` once, in its first non-empty batch."""

    def __init__(self, faults: FaultSettings) -> None:
        self.pending = set(faults.kill)
        self.killed: list[str] = []

    def maybe_kill(self, stage: str) -> None:
        if stage in self.pending:
            self.killed_once(stage)
            raise InjectedKill(f"the {stage} query was killed mid-batch (fault injection)")

    def killed_once(self, stage: str) -> None:
        """Note that `stage` was killed (by this killer, or by a copy of it that ran the
        batch elsewhere); it is not killed again."""
        if stage in self.pending:
            self.pending.discard(stage)
            self.killed.append(stage)
