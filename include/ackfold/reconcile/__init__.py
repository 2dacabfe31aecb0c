"""Reconciling: Storm's acker as a batch XOR fold of the ledger's events, per root.

- `fold`: the fold and the classification in plain Python, the reference both engines
  are tested against;
- `duck_fold` and `embedded`: the same fold in DuckDB SQL, and the embedded engine's run
  (`EmbeddedReconciler`), in the calling process with no JVM;
- `spark_fold` and `reconciler`: the same fold as Spark expressions, and the Spark
  engine's run (`Reconciler`).

The run every caller uses, `run_reconcile` (the ledger's turn, the quiet path, the
engine `engine.kind` chooses), stands above the engines: `ackfold.runs.reconcile`.
Names load on first use: the embedded engine's fold imports no pyspark.

Example:
    >>> from ackfold.runs import run_reconcile
    >>> run_reconcile(settings)["by_status"]          # doctest: +SKIP
    {'completed': 1998, 'failed': 2}
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ackfold.reconcile.embedded import EmbeddedReconciler
    from ackfold.reconcile.reconciler import Reconciler

__all__ = ["EmbeddedReconciler", "Reconciler"]

_LAZY = {
    "EmbeddedReconciler": "ackfold.reconcile.embedded",
    "Reconciler": "ackfold.reconcile.reconciler",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'ackfold.reconcile' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
