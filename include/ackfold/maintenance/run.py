"""`run_maintenance`: one maintenance run, whoever asks for it (`ackfold_maintenance`,
`ackfold maintain`, the packaged `maintenance.py` on Spark, the soak).

It owns what every run needs, in this order:

1. the ledger's turn (`ackfold.ledger.commits.lease.ledger_turn`): reconciles, replays and
   maintenance take turns on every host, and every commit of the run carries the lease's
   epoch (the fence claims every ledger table before anything is read), so a run frozen
   past its lease commits nothing more (issue 55);
2. the engine, resolved once (`ackfold.engines.resolve`: the one given, or the one
   `engine.kind` chooses), whose `maintain` runs the steps: the embedded one in delta-rs
   in this process; Spark on the session given (or one started for the run) where its
   commits are safe, and in delta-rs elsewhere
   (`ackfold.ledger.housekeeping.maintenance.maintain_steps`);
3. the steps, each timed and said as it starts and ends (`progress`): retention,
   optimize, vacuum, logs (`ackfold.ledger.housekeeping.store_maintenance.STEPS`);
4. the summary, with the engine, the epoch, the files and bytes VACUUM deleted and the
   seconds of each step, and its metrics (`ackfold.metrics.export_run`) when metrics
   are on.

A dry run (`dry_run=True`) reads what the steps would do and commits nothing: it takes no
turn and starts no engine (`ackfold.maintenance.dry_run`).

Example:
    >>> from ackfold.config import load_settings
    >>> summary = run_maintenance(load_settings())                 # doctest: +SKIP
    >>> summary["engine"], summary["events_deleted"], summary["files_removed"]  # doctest: +SKIP
    ('embedded', 120440, 312)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings
from ackfold.engines import Engine, for_run
from ackfold.ledger.commits.lease import ledger_turn
from ackfold.ledger.commits.lock import DEFAULT_WAIT
from ackfold.ledger.housekeeping.store_maintenance import STEPS, removed_totals
from ackfold.ledger.storage.run_store import Store, using

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("ackfold.maintenance")


class Steps:
    """Times each step of a run and says it (`say`): `maintenance: vacuum ...` as it
    starts, `maintenance: vacuum done in 1.2 s` as it ends."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.say(f"maintenance: {name} ({STEPS.index(name) + 1}/{len(STEPS)}) ...")
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = round(time.monotonic() - started, 3)
        self.say(f"maintenance: {name} done in {self.seconds[name]:.1f} s")


def run_maintenance(
    settings: Settings,
    *,
    engine: Engine | str | None = None,
    spark: SparkSession | Callable[[], SparkSession] | None = None,
    now: datetime | None = None,
    dry_run: bool = False,
    holder: str = "maintenance",
    wait: float = DEFAULT_WAIT,
    say: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Maintain the ledger under `settings.table_root` once and return the run's summary.

    `engine` is the engine, or a registered engine's name (`embedded`, `spark`), instead
    of the one `engine.kind` chooses; `spark` is the Spark
    engine's session, or what makes it when it is needed (else `get_spark`): on an object
    store, or where Spark's commits are not put-if-absent, no session starts and the
    steps are delta-rs's. `now` is the run's time for the retention's cut-off. `holder`
    names the run in the ledger's lease, `wait` is how long to wait for another run's
    turn (`say` tells of the wait), and `progress` hears each step start and end (else
    the `ackfold.maintenance` log). Raises `LedgerBusy` if the turn does not come,
    `LeaseLost` if the run loses it, `MaintenanceError` for a table it cannot keep
    readable by delta-rs."""
    at = (now or datetime.now(UTC)).astimezone(UTC)
    if dry_run:
        from ackfold.maintenance.dry_run import plan_maintenance

        return plan_maintenance(settings, now=at)
    # Whatever `engine.kind` says, a store where Spark's commits are unsafe is maintained
    # in delta-rs: nothing here is refused
    # (`ackfold.ledger.housekeeping.maintenance.spark_steps_safe`).
    steps = Steps(progress or log.info)
    # The run's store, resolved once and handed to the engine, the lease and its fence.
    store = Store.at(settings.table_root)
    with (
        using(store),
        for_run(engine, settings, spark=spark, refuse=False, store=store) as chosen,
        ledger_turn(settings, holder, wait=wait, say=say or log.info, store=store) as fence,
    ):
        summary = chosen.maintain(now=at, step=steps)
        epoch = fence.epoch
    removed = summary.get("removed", {})
    summary.update(
        engine=chosen.name,
        epoch=epoch,
        dry_run=False,
        **removed_totals(removed),
        seconds_by_step=steps.seconds,
    )
    from ackfold.metrics import export_run

    export_run(settings, "maintenance", summary)
    return summary
