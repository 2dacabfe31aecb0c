"""Reconciling: Storm's acker as a batch XOR fold of the ledger's events, per root.

- `fold`: the fold and the classification in plain Python, the reference the Spark
  reconciler is tested against;
- `reconciler`: `Reconciler` and `reconcile()`, the incremental fold into `root_state`.
"""
