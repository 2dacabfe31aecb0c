"""The Spark engine (`engine.kind: spark`): every verb on a Spark session, for ledgers
larger than one machine. Each operation delegates to the verb's Spark code; the contract
is `ackfold.engines.Engine`. The session is the one given, or what `spark` starts, or
(none given) one `ackfold.spark.get_spark` starts, only when an operation needs it: a
quiet reconcile, and maintenance where Spark's commits are unsafe, start none.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from ackfold.engines.base import SparkSource, ValidatorFor
from ackfold.engines.choose import SPARK

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ackfold.config import Settings
    from ackfold.ledger.housekeeping.store_maintenance import Step
    from ackfold.ledger.schema.tables import Ledger
    from ackfold.ledger.storage.run_store import Store
    from ackfold.quality.batches import Window
    from ackfold.quality.report import CheckResult, QualityReport
    from ackfold.quality.validator import Validator
    from ackfold.replay.bookkeeping import Bookkeeper
    from ackfold.replay.planner import Planner
    from ackfold.replay.queues import SourceQueues

# The dataframes of the quality run's batches here: Spark's, which GX validates.
FRAMES: Final = "spark"


class SparkEngine:
    """The verbs on a Spark session (`spark`: a session, or what starts one)."""

    name = SPARK
    runs_in_task = False

    def __init__(
        self, settings: Settings, spark: SparkSource = None, *, store: Store | None = None
    ) -> None:
        self.settings = settings
        from ackfold.ledger.storage.run_store import store_for

        # The run's store (resolved once by the run function), else the current one's.
        self.store = store or store_for(settings.table_root)
        self._spark = spark
        self._session: SparkSession | None = None

    def session(self, app_name: str) -> SparkSession:
        """The run's session, started (as `app_name`, when none was given) on first use."""
        if self._session is None:
            if self._spark is None:
                from ackfold.spark import get_spark

                self._session = get_spark(self.settings, app_name=app_name)
            else:
                self._session = self._spark() if callable(self._spark) else self._spark
        return self._session

    def check_commits(self) -> None:
        from ackfold.ledger.storage.protocol import refuse_unsafe_spark_engine

        refuse_unsafe_spark_engine(self.settings)

    def fold(self, *, now: datetime, app: str | None) -> dict[str, Any]:
        from ackfold.reconcile.reconciler import Reconciler

        session = self.session("ackfold-reconcile")
        return Reconciler(session, self.settings, now=now, app=app).run()

    def replay_planner(self, queues: SourceQueues, *, now: datetime) -> Planner:
        from ackfold.replay.spark_planner import SparkPlanner

        return SparkPlanner(self.session("ackfold-replay"), self.settings, queues, now=now)

    def replay_books(self, ledger: Ledger) -> Bookkeeper:
        from ackfold.replay.bookkeeping import SparkBookkeeper

        return SparkBookkeeper(self.session("ackfold-replay"), ledger)

    def quality_checks(
        self,
        *,
        window: Window,
        app: str | None,
        validator_for: ValidatorFor,
        say: Callable[[str], None],
    ) -> tuple[Validator, list[CheckResult], list[str]]:
        from ackfold.ledger.schema.tables import Ledger
        from ackfold.ledger.setup.create import create_tables
        from ackfold.quality.checks import check_on_spark

        spark = self.session("ackfold-quality")
        create_tables(spark, Ledger(self.settings.table_root))
        validator = validator_for(FRAMES)
        results, apps = check_on_spark(spark, self.settings, window, app, validator, say)
        return validator, results, apps

    def keep_quality(self, report: QualityReport) -> None:
        from ackfold.quality.checks import keep_on_spark

        keep_on_spark(self.session("ackfold-quality"), self.settings, report)

    def maintain(self, *, now: datetime, step: Step) -> dict[str, Any]:
        from ackfold.ledger.housekeeping.maintenance import maintain_steps, spark_steps_safe

        # Where Spark's commits are unsafe (an object store), the steps are delta-rs's.
        session = self.session("ackfold-maintenance") if spark_steps_safe(self.settings) else None
        return maintain_steps(session, self.settings, now=now, step=step)

    def close(self) -> None:
        # The session outlives the run: the caller (a job, the CLI) stops what it started.
        return None
