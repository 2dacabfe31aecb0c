"""The DAG files import cleanly, and ackfold_smoke runs a real spark-submit to success."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.airflow.conftest import SETTINGS
from tests.conftest import PROJECT_DIR


@pytest.fixture(scope="module")
def dagbag():  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(PROJECT_DIR / "dags"))


def test_every_dag_file_imports_without_errors(dagbag) -> None:  # type: ignore[no-untyped-def]
    assert dagbag.import_errors == {}
    assert "ackfold_smoke" in dagbag.dags


def test_every_dag_is_documented_tagged_and_retried(dagbag) -> None:  # type: ignore[no-untyped-def]
    for dag_id, dag in dagbag.dags.items():
        assert dag.doc_md, f"{dag_id} has no doc_md"
        assert "ackfold" in dag.tags, f"{dag_id} is not tagged ackfold"
        for task in dag.tasks:
            assert task.retries >= 1, f"{dag_id}.{task.task_id} never retries"
            assert task.on_failure_callback, f"{dag_id}.{task.task_id} has no failure hook"


def test_smoke_dag_submits_to_spark_default(dagbag) -> None:  # type: ignore[no-untyped-def]
    dag = dagbag.dags["ackfold_smoke"]
    (task,) = dag.tasks
    assert task.task_type == "SparkSubmitOperator"
    assert task._conn_id == "spark_default"
    assert Path(task.application) == PROJECT_DIR / "spark_apps" / "smoke.py"
    assert "delta-spark_4.1_2.13-4.4.0.jar" in task.jars
    assert task.conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"


def test_smoke_dag_runs_to_success_with_a_real_spark_submit(dagbag) -> None:  # type: ignore[no-untyped-def]
    import deltalake
    from airflow.utils.state import DagRunState

    run = dagbag.dags["ackfold_smoke"].test()
    assert run.state == DagRunState.SUCCESS
    table = deltalake.DeltaTable(f"{SETTINGS.table_root}/smoke").to_pandas()
    assert dict(zip(table["word"], table["n"], strict=True)) == {"storm": 1, "spark": 3, "delta": 1}
