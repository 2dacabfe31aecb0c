"""Maintenance as a verb: the ledger kept small and fast to read, once a day.

- `run`: `run_maintenance`, the one run every caller uses (the `ackfold_maintenance`
  DAG, `ackfold maintain`, the packaged `maintenance.py` on Spark): the ledger's turn and
  its epoch, the engine chosen once, each step timed, the summary and its metrics;
- `dry_run`: `plan_maintenance`, what a run would delete and rewrite now, read with
  delta-rs and committed never (`run_maintenance(..., dry_run=True)`).

The steps themselves are the ledger's (`ackfold.ledger.housekeeping.maintenance` on Spark,
`ackfold.ledger.housekeeping.store_maintenance` in delta-rs): retention, OPTIMIZE, VACUUM, then
checkpoints and log cleanup.

Example:
    >>> from ackfold.maintenance import run_maintenance
    >>> run_maintenance(settings)["files_removed"]          # doctest: +SKIP
    312
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ackfold.maintenance.dry_run import plan_maintenance
    from ackfold.maintenance.run import run_maintenance

__all__ = ["plan_maintenance", "run_maintenance"]

_LAZY = {
    "plan_maintenance": "ackfold.maintenance.dry_run",
    "run_maintenance": "ackfold.maintenance.run",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'ackfold.maintenance' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
