"""`Engine`: what an engine that folds the ledger does for each verb, and nothing else.

Each verb's run function (`run_reconcile`, `run_replay`, `run_quality`, `run_maintenance`)
owns what is the same on every engine: the ledger's turn, the fence's claim of the tables
it writes, the quiet path, the summary and its metrics. It receives an engine and calls
the operations below; it never asks which engine it has. The engines are registered in
`ackfold.engines.choose`; `docs/reference/engines.md` lists this contract for whoever adds
a third (a unit test checks that the page names every operation).

An engine is made for one run (`EngineFactory(settings, spark, store=store)`): it may
hold what the run starts (a Spark session, a DuckDB connection) until `close`. `store` is
the run's store (`ackfold.ledger.storage.run_store.Store`), resolved once by the run
function; a factory that takes no `store` is still called with `(settings, spark)`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ackfold.config import Settings
    from ackfold.ledger.housekeeping.store_maintenance import Step
    from ackfold.ledger.schema.tables import Ledger
    from ackfold.quality.batches import Window
    from ackfold.quality.report import CheckResult, QualityReport
    from ackfold.quality.validator import Validator
    from ackfold.replay.bookkeeping import Bookkeeper
    from ackfold.replay.planner import Planner
    from ackfold.replay.queues import SourceQueues

# What a caller hands an engine for Spark: a session, or what starts one when it is needed.
SparkSource: TypeAlias = "SparkSession | Callable[[], SparkSession] | None"
# A validator for the quality run, given the kind of dataframes its batches are
# (`"spark"` or `"pandas"`: `ackfold.quality.validator.Validator`'s `frames`).
ValidatorFor: TypeAlias = "Callable[[str], Validator]"


@runtime_checkable
class Engine(Protocol):
    """The operations every verb needs of an engine. Every commit an operation makes is
    under the fence its run function holds (`ackfold.ledger.commits.fence`): made with no fence in
    force it raises (invariant 19)."""

    #: The engine's registered name, as summaries and metrics show it (`engine`).
    name: str
    #: Whether Airflow runs a verb's run function in the task's own process (True), or
    #: spark-submits the packaged entry point (`ackfold.jobs`) that calls it (False).
    runs_in_task: bool

    def check_commits(self) -> None:
        """Raise (an `AckfoldError` naming the setting) if this engine's commits to the
        derived tables could be lost on the ledger's store; commits nothing."""
        ...

    def fold(self, *, now: datetime, app: str | None) -> dict[str, Any]:
        """Fold the events new since the mark into `root_state` (only `app`'s, if given) as
        of `now`: the reference fold (`ackfold.reconcile.fold`). Commits `root_state` and
        `unmatched_events`, the mark with the state it describes (invariant 16). Returns the
        run's summary: at least `by_status`. The run function has claimed both tables."""
        ...

    def replay_planner(self, queues: SourceQueues, *, now: datetime) -> Planner:
        """The replay's planner over the ledger as this engine reads it: the decisions are
        `ackfold.replay.planner.Planner`'s; the engine only reads rows. Commits nothing."""
        ...

    def replay_books(self, ledger: Ledger) -> Bookkeeper:
        """The replay's bookkeeper: appends `replay_log` rows and settles `root_state` and
        `dead_letters` after the sends (`ackfold.replay.bookkeeping.Bookkeeper`)."""
        ...

    def quality_checks(
        self,
        *,
        window: Window,
        app: str | None,
        validator_for: ValidatorFor,
        say: Callable[[str], None],
    ) -> tuple[Validator, list[CheckResult], list[str]]:
        """The quality inputs and their checks: creates the ledger's missing tables, builds
        the batches of the ledger suites and of each app's delivery suites over `window`
        (`app`'s rows only, if given), validates them with `validator_for(frames)`, and
        returns the validator, the results and the apps checked. Commits no check result."""
        ...

    def keep_quality(self, report: QualityReport) -> None:
        """Commit `report`'s rows to `quality_results`, replacing the rows of the same run
        id (a retried task). Quality takes no lease: it appends only to its own table."""
        ...

    def maintain(self, *, now: datetime, step: Step) -> dict[str, Any]:
        """Retention (as of `now`), OPTIMIZE, VACUUM and log cleanup, each step wrapped in
        `step(name)` (`ackfold.ledger.housekeeping.maintenance.maintain_steps`); returns what
        each did.
        Commits to every ledger table, each commit carrying the fence's epoch."""
        ...

    def close(self) -> None:
        """Release what the engine started for the run (not a session it was given)."""
        ...


# What the registry holds for each engine: it makes the engine of one run.
EngineFactory: TypeAlias = "Callable[[Settings, SparkSource], Engine]"
