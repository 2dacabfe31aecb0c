"""The engines that fold the ledger, behind one door.

Every verb's run function (`run_reconcile`, `run_replay`, `run_quality`,
`run_maintenance`) receives an `Engine` (or resolves one here) and calls its operations;
none asks which engine it has. Two are ackfold's, named alike and side by side:

- `ackfold.engines.embedded`: DuckDB and delta-rs in this process, with no JVM;
- `ackfold.engines.spark`: a Spark session, for ledgers larger than one machine.

`ackfold.engines.choose` is the one module that chooses (`engine_for`, `choose`,
`resolve`) and the registry (`register`): a third engine is one new module that implements
`Engine` (`ackfold.engines.base`; its contract is in `docs/reference/engines.md`) plus one
`register` call. Both engines give the same statuses row for row (invariant 15,
`tests/conformance`).

Example:
    >>> from ackfold.config import load_settings
    >>> from ackfold.engines import choose
    >>> choose(load_settings(warehouse="/srv/warehouse")).name
    'embedded'
"""

from __future__ import annotations

from ackfold.engines.base import Engine, EngineFactory, SparkSource
from ackfold.engines.choose import (
    AUTO,
    EMBEDDED,
    SPARK,
    build,
    by_session,
    choose,
    engine_for,
    for_run,
    register,
    registered,
    resolve,
    unregister,
)

__all__ = [
    "AUTO",
    "EMBEDDED",
    "SPARK",
    "Engine",
    "EngineFactory",
    "SparkSource",
    "build",
    "by_session",
    "choose",
    "engine_for",
    "for_run",
    "register",
    "registered",
    "resolve",
    "unregister",
]
