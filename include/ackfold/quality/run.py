"""One quality run: build the batches, validate each against its suite, keep the results
in `quality_results`, publish Data Docs. `ackfold quality` and `ackfold_quality` call it.

It takes no ledger lock: it reads the ledger and appends only to `quality_results`.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ackfold.config import Settings
from ackfold.ledger.conflicts import retry_conflicts
from ackfold.ledger.store import is_object_store
from ackfold.ledger.tables import QUALITY_RESULTS, Ledger, spark_schema
from ackfold.ledger.writer import object_store_writer
from ackfold.quality.batches import LedgerFrames, Window
from ackfold.quality.expectations import Suite, delivery_suites, ledger_suites
from ackfold.quality.report import CheckResult, QualityReport
from ackfold.quality.validator import Validator

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


RUN_ID = re.compile(r"^[\w.:+\-]{1,200}$")


def quality_run_id(airflow_run_id: str) -> str:
    """The quality run id of an Airflow DAG run (a retry of its task reuses it)."""
    return "airflow-" + re.sub(r"[^\w.:+\-]", "_", airflow_run_id)[:190]


class QualityViolation(RuntimeError):
    """A delivery guarantee or a ledger invariant did not hold. The message lists each
    violated expectation with its observed value."""

    def __init__(self, report: QualityReport) -> None:
        super().__init__(report.violation_message())
        self.report = report


def run_quality(
    spark: SparkSession,
    settings: Settings,
    *,
    app: str | None = None,
    now: datetime | None = None,
    run_id: str | None = None,
    say: Callable[[str], None] = lambda text: None,
) -> QualityReport:
    """Check the ledger (the rows of `app` only, if given) over `quality.window` before
    `now`. Returns the report; it does not raise on a violation (see `check`).

    Running again with the same `run_id` (a retried Airflow task) replaces that run's
    rows in `quality_results`."""
    if run_id is not None and not RUN_ID.match(run_id):
        raise ValueError(f"run id {run_id!r}: use letters, digits and . _ : + - only")
    ledger = Ledger(settings.table_root)
    ledger.create(spark)
    run_at = datetime.now(UTC)
    assert settings.quality.window is not None  # Settings resolves it
    window = Window.ending(now or run_at, settings.quality.window)
    run_id = run_id or f"{run_at:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    frames = LedgerFrames(spark, settings, window, app=app)
    batches: list[tuple[Suite, DataFrame]] = list(
        zip(
            ledger_suites(), (frames.ack_events(), frames.roots(), frames.root_state()), strict=True
        )
    )
    apps = frames.apps()
    for name in apps:
        delivery = frames.delivery(name).cache()
        completed = bool(delivery.first()["completed"])  # type: ignore[index]
        suites = delivery_suites(settings.app(name), name, latency=completed)
        batches += zip(suites, (frames.overdue(name), frames.sent(name), delivery), strict=True)

    assert settings.quality.docs_dir is not None
    validator = Validator(
        settings.quality.docs_dir,
        run_id,
        keep=settings.quality.docs_keep,
        assets_dir=settings.quality.assets_dir,
    )
    results: list[CheckResult] = []
    for suite, frame in batches:
        started = time.monotonic()
        found = validator.validate(suite, frame)
        failed = sum(not r.success for r in found)
        say(
            f"quality: {suite.name}: {len(found)} checks, {failed} failed "
            f"({time.monotonic() - started:.1f} s)"
        )
        results += found
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
    rows = spark.createDataFrame(report.rows(), spark_schema(QUALITY_RESULTS))
    # The id matched RUN_ID: no quote can reach this predicate.
    path = ledger.path(QUALITY_RESULTS)
    if is_object_store(ledger.root):  # delta-rs commits every ledger table there (issue 38)
        writer = object_store_writer(ledger.root)
        writer.replace_where(QUALITY_RESULTS, rows.toArrow(), f"run_id = '{run_id}'")
        return report
    retry_conflicts(
        lambda: (
            rows.write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", f"run_id = '{run_id}'")
            .save(path)
        ),
        what=f"write of quality run {run_id} to {path}",
    )
    return report


def check(report: QualityReport) -> QualityReport:
    """`report`, or `QualityViolation` if any expectation failed."""
    if not report.passed:
        raise QualityViolation(report)
    return report
