"""`run_reconcile`: one reconcile run, whoever asks for it (the DAG, the CLI, the demo).

It owns what every run needs, in this order:

0. the run's store (`ackfold.ledger.storage.run_store.Store`), resolved once and handed to
   the engine, the lease and the fence;
1. the ledger's turn (`ackfold.ledger.commits.lease.ledger_turn`): one writer of `root_state` at a
   time, on every host;
2. the quiet path (`ackfold.reconcile.quiet`): nothing new and no timeout due is answered
   from the tables as they stand, with no engine at all;
3. the engine's fold (`ackfold.engines.Engine.fold`), on the engine given or the one
   `engine.kind` chooses (`ackfold.engines.resolve`): the embedded one in this process
   (`ackfold.reconcile.embedded`), or Spark (`ackfold.reconcile.reconciler`), on the
   session given or a new one;
4. the summary, with the engine that made it (`engine`: `quiet`, or the engine's name).

Both engines read and move the same mark of what has been folded (in `root_state`:
`ackfold.ledger.commits.marks`), so a ledger reconciled by one is reconciled next by the other
without folding anything twice; before either reads anything, the run claims the tables
it writes with the lease's epoch (`ackfold.ledger.commits.fence`).

Example:
    >>> from ackfold.config import load_settings
    >>> summary = run_reconcile(load_settings())                 # doctest: +SKIP
    >>> summary["engine"], summary["by_status"]                   # doctest: +SKIP
    ('embedded', {'completed': 1998, 'failed': 2})
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import Settings
from ackfold.engines import SPARK, Engine, for_run
from ackfold.ledger.commits.lease import ledger_turn
from ackfold.ledger.commits.lock import DEFAULT_WAIT
from ackfold.ledger.schema.tables import ROOT_STATE, UNMATCHED_EVENTS, Ledger
from ackfold.ledger.storage.run_store import Store, using

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("ackfold.reconcile")

QUIET: Final = "quiet"


def run_reconcile(
    settings: Settings,
    *,
    now: datetime | None = None,
    app: str | None = None,
    spark: SparkSession | Callable[[], SparkSession] | None = None,
    engine: Engine | str | None = None,
    holder: str = "reconcile",
    wait: float = DEFAULT_WAIT,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Fold what is new into `root_state` and return the run's summary.

    `engine` is the engine to fold on, or the name of a registered one (`embedded`,
    `spark`), instead of the one `engine.kind` chooses; `spark` is the session of the
    Spark engine, or what makes it when it is needed (else `get_spark`). `holder` names the
    run in the ledger's lease, and `wait` is how long to wait for another run's turn. The
    run's counters go over OTLP when metrics are on."""
    from ackfold.ledger.commits.marks import check_app_name
    from ackfold.reconcile import quiet

    at = (now or datetime.now(UTC)).astimezone(UTC)
    if app is not None:
        check_app_name(app)
    # The run's store, resolved once and handed to the engine, the lease and its fence
    # (and current for what reads deep in the run: `store_for`).
    store = Store.at(settings.table_root)
    turn = partial(ledger_turn, settings, _holder(holder, app), store=store)
    with (
        using(store),
        for_run(engine, settings, spark=spark, store=store) as chosen,
        turn(wait=wait, say=say or log.info) as fence,
    ):
        summary = quiet.quiet_summary(
            settings, now=at, since=(at - settings.reconcile.lookback).date(), app=app
        )
        if summary is not None:
            return _exported(settings, {**summary, "engine": QUIET})
        # An engine given by name is refused where `engine.kind` naming it would be.
        chosen.check_commits()
        # Before anything is read: no run that lost the lease commits to them any more.
        ledger = Ledger(settings.table_root)
        fence.claim([ledger.path(ROOT_STATE), ledger.path(UNMATCHED_EVENTS)])
        summary = chosen.fold(now=at, app=app)
    return _exported(settings, {**summary, "engine": chosen.name})


def _exported(settings: Settings, summary: dict[str, Any]) -> dict[str, Any]:
    # The run's counters over OTLP when metrics are on (`ackfold.metrics`), for every
    # caller: the DAG, the CLI, the Spark job.
    from ackfold.metrics import export_run

    export_run(settings, "reconcile", summary)
    return summary


def _holder(holder: str, app: str | None) -> str:
    return f"{holder} --app {app}" if app else holder


def reconcile(
    spark: SparkSession,
    settings: Settings,
    *,
    now: datetime | None = None,
    app: str | None = None,
) -> dict[str, Any]:
    """Fold the events new since the last run into root_state with `spark`, and return a
    summary: `run_reconcile` on the Spark engine, which holds the
    ledger's turn, skips Spark when nothing is new and no timeout is due, and pushes the
    run's metrics."""
    return run_reconcile(settings, now=now, app=app, spark=spark, engine=SPARK)
