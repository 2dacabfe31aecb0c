"""Reconciling: Storm's acker as a batch XOR fold of the ledger's events, per root.

- `fold`: the fold and the classification in plain Python, the reference both engines
  are tested against;
- `duck_fold` and `embedded`: the same fold in DuckDB SQL, and the embedded engine's run
  (`EmbeddedReconciler`), in the calling process with no JVM;
- `spark_fold` and `reconciler`: the same fold as Spark expressions, and the Spark
  engine's run (`Reconciler`, and `reconcile(spark, settings)`);
- `run`: `run_reconcile`, the one run every caller uses: the ledger's turn, the quiet
  path, the engine `engine.kind` chooses.

Names load on first use: `run_reconcile` on the embedded engine imports no pyspark.

Example:
    >>> from ackfold.reconcile import run_reconcile
    >>> run_reconcile(settings)["by_status"]          # doctest: +SKIP
    {'completed': 1998, 'failed': 2}
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ackfold.reconcile.embedded import EmbeddedReconciler
    from ackfold.reconcile.reconciler import Reconciler, reconcile
    from ackfold.reconcile.run import run_reconcile

__all__ = ["EmbeddedReconciler", "Reconciler", "reconcile", "run_reconcile"]

_LAZY = {
    "EmbeddedReconciler": "ackfold.reconcile.embedded",
    "Reconciler": "ackfold.reconcile.reconciler",
    "reconcile": "ackfold.reconcile.reconciler",
    "run_reconcile": "ackfold.reconcile.run",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'ackfold.reconcile' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
