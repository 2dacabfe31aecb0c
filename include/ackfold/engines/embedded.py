"""The embedded engine (`engine.kind: embedded`): every verb in this process, with no JVM.
DuckDB computes and delta-rs reads the ledger and commits (`ackfold.embedded`). Each
operation delegates to the verb's embedded code; the contract is `ackfold.engines.Engine`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from ackfold.engines.base import SparkSource, ValidatorFor
from ackfold.engines.choose import EMBEDDED

if TYPE_CHECKING:
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

# The dataframes of the quality run's delivery batches here: small pandas frames.
FRAMES: Final = "pandas"


class EmbeddedEngine:
    """DuckDB and delta-rs in this process; `spark` is ignored."""

    name = EMBEDDED
    runs_in_task = True

    def __init__(
        self, settings: Settings, spark: SparkSource = None, *, store: Store | None = None
    ) -> None:
        self.settings = settings
        from ackfold.ledger.storage.run_store import store_for

        # The run's store (resolved once by the run function), else the current one's.
        self.store = store or store_for(settings.table_root)

    def check_commits(self) -> None:
        # delta-rs commits put-if-absent on every store it reaches (invariant 14).
        return None

    def fold(self, *, now: datetime, app: str | None) -> dict[str, Any]:
        from ackfold.reconcile.embedded import EmbeddedReconciler

        return EmbeddedReconciler(self.settings, now=now, app=app, store=self.store).run()

    def replay_planner(self, queues: SourceQueues, *, now: datetime) -> Planner:
        from ackfold.replay.duck_planner import EmbeddedPlanner

        return EmbeddedPlanner(self.settings, queues, now=now)

    def replay_books(self, ledger: Ledger) -> Bookkeeper:
        from ackfold.replay.embedded_books import EmbeddedBookkeeper

        return EmbeddedBookkeeper(ledger)

    def quality_checks(
        self,
        *,
        window: Window,
        app: str | None,
        validator_for: ValidatorFor,
        say: Callable[[str], None],
    ) -> tuple[Validator, list[CheckResult], list[str]]:
        from ackfold.quality.checks import check_embedded, create_missing

        create_missing(self.settings)
        return check_embedded(self.settings, window, app, lambda: validator_for(FRAMES), say)

    def keep_quality(self, report: QualityReport) -> None:
        from ackfold.quality.checks import keep_embedded

        keep_embedded(self.settings, report)

    def maintain(self, *, now: datetime, step: Step) -> dict[str, Any]:
        from ackfold.ledger.housekeeping.maintenance import maintain_steps

        return maintain_steps(None, self.settings, now=now, step=step)

    def close(self) -> None:
        return None
