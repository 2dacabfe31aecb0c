"""Reconciling: Storm's acker as a batch XOR fold of the ledger's events, per root.

- `fold`: the fold and the classification in plain Python, the reference the Spark
  reconciler is tested against;
- `spark_fold`: the same fold and classification as Spark expressions, and the next
  `root_state` rows of a batch;
- `reconciler`: `Reconciler` and `reconcile()`, the incremental run around them: new
  events, MERGE into `root_state`, the timeout sweep.

Example:
    >>> from ackfold.reconcile import reconcile
    >>> reconcile(spark, settings)["by_status"]       # doctest: +SKIP
    {'completed': 1998, 'failed': 2}
"""

from ackfold.reconcile.reconciler import Reconciler, reconcile

__all__ = ["Reconciler", "reconcile"]
