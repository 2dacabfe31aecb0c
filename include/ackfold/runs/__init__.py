"""The runs: one function per verb, which owns the ledger's turn, chooses the engine
(`ackfold.engines`) and pushes the run's metrics. The DAGs, the CLI, the demo and the
packaged Spark jobs call these and format what they return.

- `reconcile`: `run_reconcile` (its module also has `reconcile(spark, settings)`, the
  same on the Spark engine);
- `replay`: `run_replay` (its module also has `replay`, the same, raising if something
  stayed unsent), with `replayer`: `Replayer` (plan, then execute: send in batches at a
  rate, retry);
- `quality`: `run_quality`, and `check`, which raises `QualityViolation`.

The face re-exports the `run_*` functions, `Replayer`, `check` and `QualityViolation`
only: `reconcile` and `replay` are also its modules' names.

(`run_maintenance` is `ackfold.maintenance`'s: no engine calls back into that package.)

They stand above the engines, and the engines call the verbs' own code below them
(`ackfold.reconcile`, `ackfold.replay`, `ackfold.quality`), so no import runs back up.
Names load on first use: `run_reconcile` on the embedded engine imports no pyspark.

Example:
    >>> from ackfold.runs import run_reconcile
    >>> run_reconcile(settings)["by_status"]          # doctest: +SKIP
    {'completed': 1998, 'failed': 2}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ackfold import lazy

if TYPE_CHECKING:
    from ackfold.runs.quality import QualityViolation, check, run_quality
    from ackfold.runs.reconcile import run_reconcile
    from ackfold.runs.replay import run_replay
    from ackfold.runs.replayer import Replayer

__all__ = [
    "QualityViolation",
    "Replayer",
    "check",
    "run_quality",
    "run_reconcile",
    "run_replay",
]

_LAZY = {
    "QualityViolation": "ackfold.runs.quality",
    "check": "ackfold.runs.quality",
    "run_quality": "ackfold.runs.quality",
    "run_reconcile": "ackfold.runs.reconcile",
    "run_replay": "ackfold.runs.replay",
    "Replayer": "ackfold.runs.replayer",
}


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
