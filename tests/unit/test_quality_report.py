"""Quality thresholds in the configuration, and the report a quality run prints."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from ackfold.config import ConfigError, load_settings
from ackfold.ledger.schema.tables import QUALITY_RESULTS_DDL, column_names
from ackfold.quality import CheckResult, QualityReport
from ackfold.runs import QualityViolation, check
from ackfold.runs.quality import RUN_ID, quality_run_id


def test_thresholds_come_from_the_app_then_the_defaults() -> None:
    settings = load_settings(
        defaults={"quality": {"grace": "5m", "max_duplicate_rate": 0.02}},
        apps={"orders": {"quality": {"max_duplicate_rate": 0.1}}, "clicks": {}},
    )
    orders, clicks = settings.app("orders").quality, settings.app("clicks").quality
    assert (orders.max_duplicate_rate, orders.grace) == (0.1, timedelta(minutes=5))
    assert (clicks.max_duplicate_rate, clicks.max_dead_letter_rate) == (0.02, 0.01)
    assert orders.latency_p99 is None  # the app's timeout


def test_the_demo_app_keeps_its_thresholds_under_a_partial_override() -> None:
    from ackfold.demo.wordcount import with_demo_policy

    # Where the demo runs: its policy under the configuration's `apps.wordcount`.
    settings = with_demo_policy(load_settings(apps={"wordcount": {"quality": {"grace": "1m"}}}))
    quality = settings.app("wordcount")
    assert quality.quality.grace == timedelta(minutes=1)
    assert quality.quality.max_dead_letter_rate == 0.05, "the demo's own, not the default"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"max_duplicate_rate": 1.5}, "defaults.quality.max_duplicate_rate"),
        ({"grace": "soon"}, "defaults.quality.grace"),
        ({"typo": 1}, "defaults.quality.typo"),
    ],
)
def test_a_bad_threshold_is_named(value: dict[str, object], error: str) -> None:
    with pytest.raises(ConfigError, match=error.replace(".", r"\.")):
        load_settings(defaults={"quality": value})


LOST = CheckResult(
    suite="delivery.orders.overdue_roots", app="orders", check="no_lost_roots",
    expectation="expect_column_values_to_be_in_set", description="orders: no lost roots",
    success=False, observed="2 of 40 rows", sample=("root_id=0x1, outcome=failed",),
)  # fmt: skip
FINE = CheckResult(
    suite="ledger.roots", app=None, check="root_id_unique",
    expectation="expect_column_values_to_be_unique", description="root_id is unique",
    success=True, observed="0 of 40 rows",
)  # fmt: skip


def _report(*results: CheckResult) -> QualityReport:
    at = datetime(2026, 11, 23, 10)
    return QualityReport(
        "r1", at, at - timedelta(days=2), results, apps=("orders",), scope="app orders"
    )


def test_a_violation_names_each_failed_check_with_what_was_observed() -> None:
    report = _report(FINE, LOST)
    assert not report.passed
    assert report.headline().startswith("ackfold quality: 1 check(s) FAILED of 2 (run r1")
    assert report.format().splitlines()[1:] == [
        "  FAILED delivery.orders.overdue_roots no_lost_roots: orders: no lost roots; "
        "observed 2 of 40 rows, e.g. root_id=0x1, outcome=failed"
    ]
    assert len(report.format(verbose=True).splitlines()) == 3
    with pytest.raises(QualityViolation, match="no_lost_roots.*observed 2 of 40 rows"):
        check(report)
    assert check(_report(FINE)).passed


def test_a_report_survives_the_quality_results_table() -> None:
    report = _report(FINE, LOST)
    columns = column_names(QUALITY_RESULTS_DDL)
    rows = [dict(zip(columns, row, strict=True)) for row in report.rows()]
    again = QualityReport.from_rows(rows)
    assert again.results == report.results
    assert (again.run_id, again.apps, again.passed) == ("r1", ("orders",), False)
    assert (again.run_at, again.window_start, again.scope) == (
        report.run_at,
        report.window_start,
        "app orders",
    )


def test_an_airflow_run_id_becomes_a_safe_quality_run_id() -> None:
    run = quality_run_id("manual__2026-11-23T10:00:00+00:00 '; DROP TABLE x")
    assert RUN_ID.match(run)
    assert run.startswith("airflow-manual__2026-11-23T10:00:00+00:00")
    assert not set("' ;") & set(run)
