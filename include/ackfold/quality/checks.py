"""The checks of a quality run, as each engine makes them, and its results kept: what
`ackfold.engines.Engine.quality_checks` and `keep_quality` call. The run itself (the
window, the run id, Data Docs, `check`) is `ackfold.runs.quality.run_quality`.

On the embedded engine they run in the calling process with no JVM: DuckDB computes the
checks' inputs over the ledger as delta-rs reads it (`check_embedded`), and delta-rs
commits the results (`keep_embedded`). On Spark, the batches are Spark DataFrames that GX
validates (`check_on_spark`, `keep_on_spark`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings
from ackfold.ledger.commits.driver_writers import object_store_writer
from ackfold.ledger.schema.contract import arrow_schema
from ackfold.ledger.schema.tables import QUALITY_RESULTS, Ledger
from ackfold.ledger.storage.conflicts import retry_conflicts
from ackfold.ledger.storage.store import is_object_store
from ackfold.quality.batches import LedgerFrames, Window
from ackfold.quality.expectations import Suite, delivery_suites, ledger_suites
from ackfold.quality.report import CheckResult, QualityReport
from ackfold.quality.validator import Validator
from ackfold.spark.frames import arrow_frame, arrow_table, local_frame

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession


# What a quality run holds beside DuckDB, on the embedded engine: Great Expectations (whose
# import starts with DuckDB's work), the delivery batches as pandas frames, Data Docs'
# rendering. DuckDB gets `engine.memory_limit` less this and what the process holds.
GX_RESERVE = 512 * 2**20


def _timed(
    suite: Suite, check: Callable[[], list[CheckResult]], say: Callable[[str], None]
) -> list[CheckResult]:
    started = time.monotonic()
    found = check()
    failed = sum(not r.success for r in found)
    say(
        f"quality: {suite.name}: {len(found)} checks, {failed} failed "
        f"({time.monotonic() - started:.1f} s)"
    )
    return found


def check_on_spark(
    spark: SparkSession,
    settings: Settings,
    window: Window,
    app: str | None,
    validator: Validator,
    say: Callable[[str], None],
) -> tuple[list[CheckResult], list[str]]:
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
        effects = _effects(settings, name)
        if effects is not None:
            suite, row = effects
            schema = ", ".join(f"{column} BIGINT" for column in row)  # rows_<i>: no user text
            batches.append((suite, local_frame(spark, [tuple(row.values())], schema)))
    results: list[CheckResult] = []
    for suite, frame in batches:
        results += _timed(suite, lambda: validator.validate(suite, frame), say)  # noqa: B023
    return results, apps


def check_embedded(
    settings: Settings,
    window: Window,
    app: str | None,
    validator_for: Callable[[], Validator],
    say: Callable[[str], None],
) -> tuple[Validator, list[CheckResult], list[str]]:
    """The ledger suites computed by DuckDB, one pass per table, and recorded as GX
    results; the delivery suites' small batches validated by GX as pandas frames.

    GX takes seconds to import, and DuckDB runs its queries without holding the GIL: GX
    is imported in a thread while DuckDB builds the batches that need no suite."""
    import threading

    import pandas  # noqa: F401  (both threads need it: imported once, before them)

    from ackfold.embedded import duck
    from ackfold.quality.duck_batches import LedgerViews
    from ackfold.quality.duck_checks import evaluate

    gx = threading.Thread(target=_import_gx, name="ackfold-import-gx", daemon=True)
    gx.start()
    db = duck.connect(settings, reserve=GX_RESERVE)
    try:
        views = LedgerViews(db, settings, window, app=app)
        ledger = (views.ack_events(), views.roots(), views.root_state())
        apps = views.apps()
        delivery = {}
        for name in apps:
            rates = views.delivery(name)
            delivery[name] = (views.overdue(name), views.sent(name), rates)
        gx.join()
        validator = validator_for()
        results: list[CheckResult] = []
        for suite, batch in zip(ledger_suites(), ledger, strict=True):
            results += _timed(
                suite,
                lambda: validator.record(suite, evaluate(db, suite, batch)),  # noqa: B023
                say,
            )
        for name in apps:
            completed = bool(delivery[name][2]["completed"].iloc[0])
            suites = delivery_suites(settings.app(name), name, latency=completed)
            batches: list[tuple[Suite, Any]] = list(zip(suites, delivery[name], strict=True))
            effects = _effects(settings, name)
            if effects is not None:
                batches.append((effects[0], _frame(effects[1])))
            for suite, frame in batches:
                results += _timed(suite, lambda: validator.validate(suite, frame), say)  # noqa: B023
        return validator, results, apps
    finally:
        db.close()


def _effects(settings: Settings, app: str) -> tuple[Suite, dict[str, Any]] | None:
    """The suite and the one row of its batch: what `app`'s dead letters left in its
    declared outputs (`ackfold.quality.effects`), read by delta-rs on either engine; None
    when the app declares no output."""
    from ackfold.quality.effects import dead_letter_counts, effects_row, effects_suite

    counts = dead_letter_counts(settings, app)
    if not counts:
        return None
    return effects_suite(app, counts), effects_row(counts)


def _frame(row: dict[str, Any]) -> pd.DataFrame:
    """A one-row batch as pandas: nullable integers (an unreadable output's count is null)."""
    import pandas as pd

    return pd.DataFrame([row]).astype(dict.fromkeys(row, "Int64"))


def _import_gx() -> None:
    import great_expectations
    import great_expectations.expectations  # noqa: F401


def create_missing(settings: Settings) -> None:
    """The ledger's tables that do not exist yet, made by delta-rs (existing ones are
    left as they are, whatever their schema: a broken schema is for the checks)."""
    from ackfold.embedded.tables import exists
    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.ledger.schema.tables import TABLES

    ledger = Ledger(settings.table_root)
    missing = [name for name in TABLES if not exists(ledger.path(name))]
    if missing:
        LedgerWriter(settings.table_root).create(missing)


def keep_on_spark(spark: SparkSession, settings: Settings, report: QualityReport) -> None:
    table = arrow_table(report.rows(), arrow_schema(QUALITY_RESULTS))
    # The id matched `ackfold.runs.quality.RUN_ID`: no quote can reach this predicate.
    ledger = Ledger(settings.table_root)
    path = ledger.path(QUALITY_RESULTS)
    if is_object_store(ledger.root):  # delta-rs commits every ledger table there (issue 38)
        writer = object_store_writer(ledger.root)
        writer.replace_where(QUALITY_RESULTS, table, f"run_id = '{report.run_id}'")
        return
    rows = arrow_frame(spark, table)
    retry_conflicts(
        lambda: (
            rows.write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", f"run_id = '{report.run_id}'")
            .save(path)
        ),
        what=f"write of quality run {report.run_id} to {path}",
    )


def keep_embedded(settings: Settings, report: QualityReport) -> None:
    """The run's `quality_results` rows, replacing any of the same run, in one delta-rs
    commit, on whatever store the ledger is."""
    import pyarrow as pa

    from ackfold.ledger.commits.writer import LedgerWriter

    writer = LedgerWriter(settings.table_root)
    schema = pa.schema(writer.table(QUALITY_RESULTS).schema().to_arrow())
    rows = arrow_table(report.rows(), schema)
    # The id matched `ackfold.runs.quality.RUN_ID`: no quote can reach this predicate.
    writer.replace_where(QUALITY_RESULTS, rows, f"run_id = '{report.run_id}'")
