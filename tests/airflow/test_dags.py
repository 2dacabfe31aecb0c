"""The DAG files import cleanly and declare what they promise (schedules, tasks, forms),
and ackfold_smoke runs a real spark-submit to success."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ackfold.jobs import APPS_DIR
from tests.airflow.conftest import SETTINGS, first_run_after
from tests.conftest import PROJECT_DIR


@pytest.fixture(scope="module")
def dagbag():  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(PROJECT_DIR / "dags"))


OURS = (
    "ackfold_smoke", "ackfold_reconcile", "ackfold_replay", "ackfold_manual_replay",
    "ackfold_manual_retract", "ackfold_maintenance", "ackfold_quality",
)  # fmt: skip
# The DAGs a person triggers: their tasks go first in the ledger pool.
MANUAL = ("ackfold_manual_replay", "ackfold_manual_retract")


def test_every_dag_file_imports_without_errors(dagbag) -> None:  # type: ignore[no-untyped-def]
    assert dagbag.import_errors == {}
    assert set(OURS) <= set(dagbag.dags)


def test_every_dag_is_documented_tagged_and_retried(dagbag) -> None:  # type: ignore[no-untyped-def]
    for dag_id, dag in dagbag.dags.items():
        assert dag.doc_md, f"{dag_id} has no doc_md"
        assert "ackfold" in dag.tags, f"{dag_id} is not tagged ackfold"
        assert len(dag.tags) >= 2, f"{dag_id} has no specific tag"
        # Airflow's `dags_are_paused_at_creation` decides, unless ackfold's settings do.
        assert dag.is_paused_upon_creation is None, f"{dag_id} overrides the deployment"
        for task in dag.tasks:
            assert task.retries >= 1, f"{dag_id}.{task.task_id} never retries"
            assert task.on_failure_callback, f"{dag_id}.{task.task_id} has no failure hook"


def test_ackfold_settings_may_pause_or_unpause_its_dags_at_creation() -> None:
    from ackfold.airflow.dags import ackfold_dags

    for paused in (True, False):
        settings = SETTINGS.model_copy(
            update={"airflow": SETTINGS.airflow.model_copy(update={"paused_at_creation": paused})}
        )
        dags = ackfold_dags(settings)
        assert {dag.is_paused_upon_creation for dag in dags.values()} == {paused}


def _spark_engine_bag(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("ACKFOLD_ENGINE__KIND", "spark")
    bag = DagBag(dag_folder=str(PROJECT_DIR / "dags" / "ackfold_dags.py"))
    assert bag.import_errors == {}
    return bag


def test_on_the_spark_engine_the_smoke_dag_submits_to_spark_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dag = _spark_engine_bag(monkeypatch).dags["ackfold_smoke"]
    (task,) = dag.tasks
    assert task.task_type == "AckfoldSparkSubmitOperator"
    assert task._conn_id == "spark_default"
    assert Path(task.application) == APPS_DIR / "smoke.py"
    # Resolved when the task runs, not when the DAG file is parsed.
    assert task.jars is None
    assert "delta-spark_4.1_2.13-4.4.0.jar" in task.resolved_jars()
    assert task.conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_smoke_dag_runs_to_success_on_either_engine(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the embedded engine, a delta-rs round trip in the task's process (an Airflow
    without a JVM); on Spark, a real spark-submit of the packaged `smoke.py`."""
    import deltalake
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils.state import DagRunState

    monkeypatch.setenv("ACKFOLD_ENGINE__KIND", engine)
    smoke = f"{SETTINGS.table_root}/smoke"
    shutil.rmtree(smoke, ignore_errors=True)
    dag = DagBag(dag_folder=str(PROJECT_DIR / "dags" / "ackfold_dags.py")).dags["ackfold_smoke"]
    (task,) = dag.tasks
    expected_type = "PythonOperator" if engine == "embedded" else "AckfoldSparkSubmitOperator"
    assert task.task_type == expected_type
    run = dag.test()
    assert run.state == DagRunState.SUCCESS
    table = deltalake.DeltaTable(smoke).to_pyarrow_table().to_pylist()
    assert {row["word"]: row["n"] for row in table} == {"storm": 1, "spark": 3, "delta": 1}


def _submits(task, app: str, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    assert task.task_type == "AckfoldSparkSubmitOperator"
    assert task._conn_id == "spark_default"
    assert Path(task.application) == APPS_DIR / app
    assert task.application_args == args
    assert (APPS_DIR / app).is_file()


def test_reconcile_runs_on_the_configured_cron_and_updates_the_root_state_asset(
    dagbag,  # type: ignore[no-untyped-def]
) -> None:
    from ackfold.airflow.assets import root_state_asset

    dag = dagbag.dags["ackfold_reconcile"]
    assert dag.schedule == SETTINGS.airflow.reconcile_schedule == "*/5 * * * *"
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    task = dag.get_task("reconcile")
    # The alerts and the metrics read root_state once the reconcile has written it.
    assert task.downstream_task_ids == {"alerts", "metrics"}
    # The embedded engine (the default): the run in the task's own process, no JVM.
    assert task.task_type == "PythonOperator"
    assert task.python_callable.__name__ == "reconcile_in_task"
    asset = root_state_asset(SETTINGS)
    assert task.outlets == [asset]
    assert asset.name == "ackfold_root_state"
    assert asset.uri == f"file://{SETTINGS.table_root}/root_state"


def test_on_the_spark_engine_the_reconcile_task_submits_its_spark_app(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("ACKFOLD_ENGINE__KIND", "spark")
    bag = DagBag(dag_folder=str(PROJECT_DIR / "dags" / "ackfold_dags.py"))
    assert bag.import_errors == {}
    task = bag.dags["ackfold_reconcile"].get_task("reconcile")
    _submits(task, "reconcile.py", [])
    assert task.pool == "ackfold_ledger"


def test_replay_is_scheduled_on_the_root_state_asset(dagbag) -> None:  # type: ignore[no-untyped-def]
    from airflow.sdk.definitions.timetables.assets import AssetTriggeredTimetable

    from ackfold.airflow.assets import root_state_asset

    dag = dagbag.dags["ackfold_replay"]
    assert isinstance(dag.timetable, AssetTriggeredTimetable)
    assert list(dag.schedule) == [root_state_asset(SETTINGS)]
    assert dag.max_active_runs == 1
    (task,) = dag.tasks
    # The embedded engine (`engine.kind` auto, a local warehouse): in the task's process.
    assert task.task_type == "PythonOperator"
    assert task.python_callable.__name__ == "run_automatic_replay"


def test_on_the_spark_engine_the_replay_is_a_spark_submit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("ACKFOLD_ENGINE__KIND", "spark")
    bag = DagBag(dag_folder=str(PROJECT_DIR / "dags" / "ackfold_dags.py"))
    assert bag.import_errors == {}
    (task,) = bag.dags["ackfold_replay"].tasks
    _submits(task, "replay.py", ["--auto"])


def test_quality_follows_every_reconcile_and_its_verdict_follows_the_checks(
    dagbag,  # type: ignore[no-untyped-def]
) -> None:
    from ackfold.airflow.assets import root_state_asset

    dag = dagbag.dags["ackfold_quality"]
    assert list(dag.schedule) == [root_state_asset(SETTINGS)]
    assert dag.max_active_runs == 1
    assert dag.get_task("check").downstream_task_ids == {"verdict", "alerts"}
    # The alerts run after any check, and leave the verdict a leaf that fails the run.
    assert dag.get_task("alerts").trigger_rule == "all_done"
    assert not dag.get_task("verdict").downstream_task_ids
    # On the embedded engine (the default), the checks run in the task's own process.
    check = dag.get_task("check")
    assert check.task_type == "PythonOperator"
    assert check.python_callable.__name__ == "quality_in_task"


def test_on_the_spark_engine_the_quality_check_is_submitted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("ACKFOLD_ENGINE__KIND", "spark")
    bag = DagBag(dag_folder=str(PROJECT_DIR / "dags"))
    assert bag.import_errors == {}
    # The run id ties the results the check writes to the verdict that reads them.
    check = bag.dags["ackfold_quality"].get_task("check")
    _submits(check, "quality.py", ["--airflow-run-id", "{{ run_id }}"])
    assert check.downstream_task_ids == {"verdict", "alerts"}


def test_maintenance_runs_daily_by_default(dagbag) -> None:  # type: ignore[no-untyped-def]
    dag = dagbag.dags["ackfold_maintenance"]
    assert SETTINGS.airflow.maintenance_schedule == "@daily"
    assert dag.schedule.expression == "0 0 * * *"
    assert dag.catchup is False
    # Not at once for last midnight: a deploy (or `make run`) does not start with it.
    assert first_run_after(dag) > datetime.now(UTC)
    (task,) = dag.tasks
    # The embedded engine: delta-rs in the task's process; on Spark, the packaged app.
    assert task.task_type == "PythonOperator"
    assert task.python_callable.__name__ == "maintenance_in_task"
    assert task.pool == "ackfold_ledger"


def test_on_the_spark_engine_maintenance_submits_its_packaged_app(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (task,) = _spark_engine_bag(monkeypatch).dags["ackfold_maintenance"].tasks
    _submits(task, "maintenance.py", [])
    assert task.pool == "ackfold_ledger"


def test_manual_replay_is_triggered_only_and_validates_before_it_replays(
    dagbag,  # type: ignore[no-untyped-def]
) -> None:
    dag = dagbag.dags["ackfold_manual_replay"]
    assert dag.schedule is None
    assert {t.task_id: t.task_type for t in dag.tasks} == {
        "validate": "_PythonDecoratedOperator",
        "replay": "_PythonDecoratedOperator",
    }
    assert dag.get_task("validate").downstream_task_ids == {"replay"}
    assert dag.get_task("replay").upstream_task_ids == {"validate"}


def test_manual_replay_form_defaults_to_a_dry_run_and_matches_the_library(
    dagbag,  # type: ignore[no-untyped-def]
) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    from ackfold.replay.params import CONF_KEYS, parse_replay_conf

    params = dagbag.dags["ackfold_manual_replay"].params
    assert tuple(params) == CONF_KEYS
    assert params.get_param("dry_run").value is True
    form = {key: params.get_param(key).value for key in CONF_KEYS}
    apps = list(SETTINGS.apps)
    assert parse_replay_conf(form, apps=apps) == parse_replay_conf({}, apps=apps)
    # The configured apps (none here: no setting names the demo's unless it ran).
    assert params.get_param("app").schema["enum"] == [None, *sorted(SETTINGS.apps)]
    for key in CONF_KEYS:
        param = params.get_param(key)
        assert param.schema.get("title"), key
        assert param.description, key
    # The form's JSON schema refuses what it can see is wrong.
    for key, bad in (("root_ids", ["12xyz"]), ("root_ids", [42]), ("limit", 0),
                     ("rate", 0), ("statuses", ["completed"]), ("app", "nope")):  # fmt: skip
        with pytest.raises(ParamValidationError):
            params.get_param(key).resolve(bad)
    params.get_param("root_ids").resolve(["-42", "0x2a"])


# The tasks that write root_state or rewrite the ledger: one at a time, on any worker.
LEDGER_WRITERS = {
    ("ackfold_reconcile", "reconcile"), ("ackfold_replay", "replay"),
    ("ackfold_manual_replay", "replay"), ("ackfold_maintenance", "maintain"),
    ("ackfold_manual_retract", "retract"),
}  # fmt: skip


def test_the_ledger_writers_take_turns_in_a_one_slot_pool_that_make_run_creates(
    dagbag,
) -> None:  # type: ignore[no-untyped-def]
    import json
    import os
    import subprocess
    import sys

    from ackfold.airflow.defaults import LEDGER_POOL
    from ackfold_dev.stack import prepare_airflow

    in_pool = {
        (dag_id, task.task_id)
        for dag_id in OURS
        for task in dagbag.dags[dag_id].tasks
        if task.pool == LEDGER_POOL
    }
    assert in_pool == LEDGER_WRITERS
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "pools", "delete", LEDGER_POOL], capture_output=True, env=os.environ)
    prepare_airflow(SETTINGS, os.environ, lambda line: None)  # what `make run` runs first
    shown = subprocess.run(
        [airflow, "pools", "get", LEDGER_POOL, "-o", "json"],
        capture_output=True, text=True, check=True, env=os.environ,
    )  # fmt: skip
    [pool] = json.loads(shown.stdout)
    assert int(pool["slots"]) == 1


@pytest.mark.parametrize(("dag_id", "work"), [("ackfold_manual_replay", "replay"),
                                               ("ackfold_manual_retract", "retract")])  # fmt: skip
def test_a_persons_replay_or_retract_goes_first_in_the_ledger_pool(
    dagbag,
    dag_id: str,
    work: str,  # type: ignore[no-untyped-def]
) -> None:
    """Queued for the one slot beside scheduled reconciles, replays and maintenance, the
    manual replay's and the manual retract's tasks outweigh every task of ackfold's
    scheduled DAGs."""
    from ackfold.airflow.defaults import LEDGER_POOL

    manual = dagbag.dags[dag_id]
    assert {task.task_id for task in manual.tasks} == {"validate", work}
    for task in manual.tasks:
        assert str(task.weight_rule).lower().endswith("absolute"), task.task_id
    weight = manual.get_task(work).priority_weight
    assert manual.get_task(work).pool == LEDGER_POOL
    # A task's weight under the default rule is its own plus its downstream tasks': at
    # most the sum over its DAG.
    for other in OURS:
        if other not in MANUAL:
            most = sum(task.priority_weight for task in dagbag.dags[other].tasks)
            assert weight > most, other


def test_manual_retract_is_triggered_only_and_validates_before_it_deletes(
    dagbag,  # type: ignore[no-untyped-def]
) -> None:
    dag = dagbag.dags["ackfold_manual_retract"]
    assert dag.schedule is None
    assert "retract" in dag.tags
    assert dag.get_task("validate").downstream_task_ids == {"retract"}
    assert "Dry run is on by default" in " ".join(dag.doc_md.split())


def test_with_spark_remote_every_spark_task_runs_its_entry_point_through_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`spark.remote` switches every Spark task from spark-submit to the same entry point
    in the task's process, its endpoint the `spark_connect` connection."""
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("ACKFOLD_SPARK__REMOTE", "sc://spark.example.com:443/;token=t0k")
    # The jobs that run on either engine run on Spark only when it is chosen.
    monkeypatch.setenv("ACKFOLD_ENGINE__KIND", "spark")
    bag = DagBag(dag_folder=str(PROJECT_DIR / "dags"))
    assert bag.import_errors == {}
    expected = {
        ("ackfold_smoke", "delta_round_trip"): ("smoke.py", []),
        ("ackfold_reconcile", "reconcile"): ("reconcile.py", []),
        ("ackfold_replay", "replay"): ("replay.py", ["--auto"]),
        ("ackfold_quality", "check"): ("quality.py", ["--airflow-run-id", "{{ run_id }}"]),
        ("ackfold_maintenance", "maintain"): ("maintenance.py", []),
    }
    for (dag_id, task_id), (app, args) in expected.items():
        task = bag.dags[dag_id].get_task(task_id)
        assert task.task_type == "PythonOperator", (dag_id, task_id)
        assert task.python_callable.__name__ == "run_spark_app"
        assert task.op_args == [app, args, None]  # no tracked app: no heartbeat named
        assert (APPS_DIR / app).is_file()
        assert task.pool == (
            "ackfold_ledger" if (dag_id, task_id) in LEDGER_WRITERS else "default_pool"
        )
    reconcile = bag.dags["ackfold_reconcile"].get_task("reconcile")
    assert reconcile.downstream_task_ids == {"alerts", "metrics"}
    assert [a.name for a in reconcile.outlets] == ["ackfold_root_state"]
