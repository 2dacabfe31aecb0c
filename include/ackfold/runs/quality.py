"""One quality run: build the batches, validate each against its suite, keep the results
in `quality_results`, publish Data Docs. `ackfold quality` and `ackfold_quality` call it.

The engine (`ackfold.engines.Engine`: the one given, or the one `engine.kind` chooses)
builds the checks' inputs and keeps the results (`ackfold.quality.checks`): on the
embedded engine in the calling process with no JVM, on Spark as Spark DataFrames that GX
validates.

It takes no ledger lock: it reads the ledger and appends only to `quality_results`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ackfold.config import Settings
from ackfold.engines import Engine, for_run
from ackfold.errors import AckfoldError
from ackfold.ledger.storage.run_store import Store, using
from ackfold.quality.batches import Window
from ackfold.quality.report import QualityReport
from ackfold.quality.validator import Validator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


RUN_ID = re.compile(r"^[\w.:+\-]{1,200}$")


def quality_run_id(airflow_run_id: str) -> str:
    """The quality run id of an Airflow DAG run (a retry of its task reuses it)."""
    return "airflow-" + re.sub(r"[^\w.:+\-]", "_", airflow_run_id)[:190]


class QualityViolation(AckfoldError, RuntimeError):
    """A delivery guarantee or a ledger invariant did not hold. The message lists each
    violated expectation with its observed value."""

    def __init__(self, report: QualityReport) -> None:
        super().__init__(report.violation_message())
        self.report = report


def run_quality(
    settings: Settings,
    *,
    spark: SparkSession | Callable[[], SparkSession] | None = None,
    app: str | None = None,
    now: datetime | None = None,
    run_id: str | None = None,
    say: Callable[[str], None] = lambda text: None,
    engine: Engine | str | None = None,
) -> QualityReport:
    """Check the ledger (the rows of `app` only, if given) over `quality.window` before
    `now`, on `engine` (an engine, or a registered engine's name), else the one `settings`
    choose (`ackfold.engines.resolve`): embedded, in this process with no JVM, or Spark
    (`spark`, or what starts it, else a session started for the run). Returns the
    report; it does not raise on a violation (see `check`).

    Running again with the same `run_id` (a retried Airflow task) replaces that run's
    rows in `quality_results`."""
    if run_id is not None and not RUN_ID.match(run_id):
        raise ValueError(f"run id {run_id!r}: use letters, digits and . _ : + - only")
    run_at = datetime.now(UTC)
    assert settings.quality.window is not None  # Settings resolves it
    window = Window.ending(now or run_at, settings.quality.window)
    run_id = run_id or f"{run_at:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    assert settings.quality.docs_dir is not None
    # The run's store, resolved once and handed to the engine (quality takes no lease).
    store = Store.at(settings.table_root)
    with using(store), for_run(engine, settings, spark=spark, store=store) as chosen:
        chosen.check_commits()  # an engine given by name is refused where its kind would be
        docs_dir = settings.quality.docs_dir

        def validator_for(frames: str) -> Validator:
            return Validator(
                docs_dir,
                run_id,
                frames=frames,
                keep=settings.quality.docs_keep,
                assets_dir=settings.quality.assets_dir,
            )

        validator, results, apps = chosen.quality_checks(
            window=window, app=app, validator_for=validator_for, say=say
        )
        docs = validator.publish()
        report = QualityReport(
            run_id=run_id,
            run_at=run_at,
            window_start=window.start,
            results=tuple(results),
            docs=docs,
            apps=tuple(apps),
            scope=f"app {app}" if app else "all apps",
        )
        chosen.keep_quality(report)
    return report


def check(report: QualityReport) -> QualityReport:
    """`report`, or `QualityViolation` if any expectation failed."""
    if not report.passed:
        raise QualityViolation(report)
    return report
