"""The DAG files' own `alerts` and `metrics` tasks, called as Airflow calls them (their
python callable with the run's context), deliver to a real SMTP server, a real webhook
and a real OTLP receiver. No Spark: root_state is written with delta-rs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ackfold.ledger.schema import status
from tests.alert_fixtures import Receiver, SmtpServer, otlp_points, state, write_state
from tests.conftest import PROJECT_DIR


@pytest.fixture(scope="module")
def dags() -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(PROJECT_DIR / "dags"))
    assert bag.import_errors == {}
    return bag.dags


def test_the_reconcile_dags_alerts_and_metrics_tasks_deliver(
    dags: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    smtp: SmtpServer,
    webhook: Receiver,
    connections: dict[str, str],
) -> None:
    now = datetime.now(UTC)  # the tasks evaluate at the wall clock's time

    def ago(minutes: float) -> datetime:
        return now - timedelta(minutes=minutes)

    warehouse = tmp_path / "warehouse"
    write_state(
        warehouse,
        [
            state(1, "wordcount", status.FAILED, ago(3), ago(1), fail_at=ago(3)),
            state(2, "wordcount", status.COMPLETED, ago(3), ago(1), last=ago(2)),
        ],
    )
    with Receiver() as collector:
        for name, value in {
            "ACKFOLD_WAREHOUSE": str(warehouse),
            "ACKFOLD_DEFAULTS__ALERTS__MAX_FAILED": "0",
            "ACKFOLD_ALERTS__EMAIL_TO": '["ops@example.test"]',
            "ACKFOLD_ALERTS__WEBHOOK_CONN_ID": connections["webhook"],
            "ACKFOLD_METRICS__ENDPOINT": collector.url,
        }.items():
            monkeypatch.setenv(name, value)
        dag = dags["ackfold_reconcile"]
        run = SimpleNamespace(start_date=ago(2))
        # The wordcount demo app's own policy overrides max_failed nowhere: 0 applies.
        result = dag.get_task("alerts").python_callable(run_id="scheduled__t", dag_run=run)
        assert result["breached"] == ["wordcount:failed"]
        assert result["sent"] == {"email": 1, "webhook": 1}
        assert smtp.messages[0]["Subject"] == "[ackfold] wordcount: failed opened"
        assert "worst roots: 0x0000000000000001" in webhook.texts()[0]  # ids as shown
        metrics = dag.get_task("metrics").python_callable(run_id="scheduled__t", dag_run=run)
        assert metrics == {"exported": True, "roots": 2, "detected": 1}
        points = otlp_points(collector)
    assert {p["attributes"]["ackfold.status"] for p in points["ackfold.roots"]} == {
        "failed",
        "completed",
    }


def test_the_quality_dags_alerts_task_reads_its_runs_results(
    dags: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    webhook: Receiver,
    connections: dict[str, str],
) -> None:
    from ackfold.ledger.schema.tables import QUALITY_RESULTS
    from ackfold.runs.quality import quality_run_id
    from tests.ledger_fixtures import write_rows

    warehouse = tmp_path / "warehouse"
    monkeypatch.setenv("ACKFOLD_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("ACKFOLD_ALERTS__WEBHOOK_CONN_ID", connections["webhook"])
    task = dags["ackfold_quality"].get_task("alerts")
    # A check that wrote nothing (it failed): no alert changes.
    assert task.python_callable(run_id="scheduled__q0")["sent"] == {}
    now = datetime.now(UTC)
    write_rows(
        warehouse,
        QUALITY_RESULTS,
        [
            {"run_id": quality_run_id("scheduled__q1"), "run_at": now, "window_start": now,
             "scope": "all apps", "suite": "delivery", "app": "wordcount",
             "check_name": "lost_roots", "expectation": "x", "description": "no lost roots",
             "success": False, "observed": "2"},
        ],
    )  # fmt: skip
    result = task.python_callable(run_id="scheduled__q1")
    assert result["breached"] == ["wordcount:quality"]
    assert "OPENED quality" in webhook.texts()[0]
    assert "lost_roots" in webhook.texts()[0]
