"""One replay run, end to end: `run_replay`. The DAGs, the CLI and the demo call it and
format what it returns.

It owns what every run needs, in this order:

- the ledger's turn (`ledger_turn`: this host's lock, then the lease every host sees),
  from the plan to the last status: two runs planning the same root at once would both
  send it;
- the engine, the one given or the one `engine.kind` chooses (`ackfold.engines.resolve`):
  the embedded one (DuckDB and delta-rs in this process, no JVM) unless that says Spark;
  then the session given, or one started for the run (after the turn is taken: another
  host may hold it);
- the claim of the tables it writes, once its plan has sends, and the plan made again if
  anything else committed to them between the plan's read and the claim (a frozen run's
  commit: `ackfold.ledger.commits.fence`);
- the plan, shown to the caller (`on_plan`: the CLI prints it and may ask before sending;
  raising there ends the run with nothing sent), then the sends and the bookkeeping
  (`ackfold.runs.replayer.Replayer.execute`);
- its metrics (`ackfold.metrics.export_run`, when metrics are on).

Example:
    >>> summary = run_replay(settings, ReplayRequest(automatic=True))   # doctest: +SKIP
    >>> summary.sent, summary.not_sent                                  # doctest: +SKIP
    (12, 0)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings
from ackfold.engines import Engine, for_run
from ackfold.ledger.commits.fence import version_of
from ackfold.ledger.commits.lease import ledger_turn
from ackfold.ledger.commits.lock import DEFAULT_WAIT
from ackfold.ledger.schema.tables import DEAD_LETTERS, REPLAY_LOG, ROOT_STATE, Ledger
from ackfold.ledger.storage.run_store import Store, using
from ackfold.replay.bookkeeping import AUTOMATIC
from ackfold.replay.planner import Plan
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replayer import Progress, Replayer, ReplaySummary, unsent_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("ackfold.replay")


def run_replay(
    settings: Settings,
    request: ReplayRequest,
    *,
    now: datetime | None = None,
    spark: SparkSession | Callable[[], SparkSession] | None = None,
    on_plan: Callable[[Plan], None] | None = None,
    progress: Progress | None = None,
    wait: float = DEFAULT_WAIT,
    say: Callable[[str], None] | None = None,
    holder: str | None = None,
    engine: Engine | str | None = None,
) -> ReplaySummary:
    """Plan and execute one replay run under the ledger's turn, on the engine `settings`
    choose; returns its summary (`summary.not_sent` counts what stayed unsent: see
    `unsent_error`). Raises `UnknownRoots` for root ids `root_state` does not know,
    `LedgerBusy` if the turn does not come within `wait` seconds.

    `engine`: the engine, or a registered engine's name, instead of the one `settings`
    choose. `spark`: the session for the Spark engine (or a function that starts it);
    ignored by the embedded engine. `now`: the run's time for the policies' backoff. `holder`:
    who waits for the turn, as others see it (default: the requester)."""
    # As others waiting for the turn read it: "waiting for the automatic replay (pid ...)".
    holder = holder or (
        "the automatic replay" if request.automatic else f"a replay by {request.requested_by}"
    )
    # The run's store, resolved once and handed to the engine, the lease and its fence.
    store = Store.at(settings.table_root)
    with (
        using(store),
        for_run(engine, settings, spark=spark, store=store) as chosen,
        ledger_turn(settings, holder, wait=wait, say=say or log.info, store=store) as fence,
    ):
        chosen.check_commits()  # an engine given by name is refused where its kind would be
        replayer = Replayer(spark, settings, now=now, engine=chosen)
        try:
            ledger = Ledger(settings.table_root)
            claimed = [ledger.path(name) for name in (ROOT_STATE, DEAD_LETTERS, REPLAY_LOG)]
            before = {path: version_of(path) for path in claimed}
            plan = replayer.plan(request)
            if plan.sends and not request.dry_run:
                # From here no run that lost the lease can change what this one reads or
                # settles (`ackfold.ledger.commits.fence`). A quiet run claims nothing.
                fence.claim(claimed)
                if _moved(before, claimed):
                    # Something else committed between the plan's read and the claim (a
                    # frozen reconcile's MERGE that completed a root): plan again, at or
                    # after the claimed snapshot, where no stale commit can land.
                    log.info("replay: the ledger changed before the claim; planning again")
                    plan = replayer.plan(request)
            if on_plan is not None:
                on_plan(plan)
            summary = replayer.execute(plan, progress=progress)
        finally:
            replayer.close()
    _export(settings, request, summary)
    return summary


def _moved(before: dict[str, int | None], paths: list[str]) -> bool:
    """Whether any of the tables at `paths` holds a commit since `before` (their versions
    before the plan) other than this run's claim (one commit each, where one exists)."""
    for path in paths:
        now, then = version_of(path), before[path]
        if now != then and (then is None or now is None or now - then > 1):
            return True
    return False


def automatic_replay(
    settings: Settings,
    *,
    app: str | None = None,
    now: datetime | None = None,
    spark: SparkSession | Callable[[], SparkSession] | None = None,
) -> dict[str, Any]:
    """The automatic replay of `ackfold_replay` (in the task's process, or through
    `ackfold/jobs/replay.py`): each app's policy; the summary as a dict. Raises
    `ReplayError` if messages stayed unsent (the next run sends exactly those)."""
    request = ReplayRequest(automatic=True, app=app, requested_by=AUTOMATIC)
    summary = run_replay(settings, request, now=now, spark=spark)
    log.info("automatic replay: %s", json.dumps(summary.as_dict(), default=str))
    if summary.not_sent:
        raise unsent_error(summary)
    return summary.as_dict()


def replay(
    spark: SparkSession | None,
    settings: Settings,
    request: ReplayRequest,
    *,
    now: datetime | None = None,
    progress: Progress | None = None,
) -> ReplaySummary:
    """`run_replay`, with `spark` for the Spark engine, that raises `ReplayError` if
    something stayed unsent."""
    summary = run_replay(settings, request, now=now, spark=spark, progress=progress)
    if summary.not_sent:
        raise unsent_error(summary)
    return summary


def _export(settings: Settings, request: ReplayRequest, summary: ReplaySummary) -> None:
    from ackfold.metrics import export_run

    who = AUTOMATIC if request.automatic else request.requested_by
    export_run(settings, "replay", summary.as_dict(), requested_by=who)
