"""The tracked apps' own DAGs (`apps.<app>.dag`): declared from the configuration, run with
a real spark-submit, and followed by the reconcile through the app's asset."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ackfold.airflow.app_dags import app_dags, reconcile_schedule
from ackfold.airflow.assets import app_asset
from ackfold.config import ConfigError, Settings, load_settings
from tests.airflow.conftest import SETTINGS, first_run_after
from tests.conftest import PROJECT_DIR

# A tracked app as a user writes one for its DAG: it gets its session from ackfold's
# configuration (spark-submit or Spark Connect alike) and records the arguments it got.
APP = """\
import sys

from ackfold.config import load_settings
from ackfold.spark import get_spark

settings = load_settings()
spark = get_spark(settings, app_name="orders")
rows = [(i, arg) for i, arg in enumerate(sys.argv[1:])]
spark.createDataFrame(rows, "i INT, arg STRING").write.format("delta").mode("append").save(
    f"{settings.table_root}/orders_runs"
)
spark.stop()
"""


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A configuration file in `tmp_path`, the directory relative application paths are
    taken from, with the billing app's file under it."""
    (tmp_path / "ackfold.yaml").write_text("{}\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "billing.py").write_text(APP)
    monkeypatch.setenv("ACKFOLD_CONFIG", str(tmp_path / "ackfold.yaml"))
    return tmp_path


def _settings(tmp_path: Path, **dag: object) -> Settings:
    app = tmp_path / "orders_app.py"
    app.write_text(APP)
    spec = {"application": str(app), **dag}
    apps = {"orders": {"dag": spec}, "billing": {"dag": {"application": "jobs/billing.py"}}}
    return SETTINGS.model_copy(update={"apps": load_settings(var_dir=tmp_path, apps=apps).apps})


def test_an_app_dag_is_declared_from_its_configuration(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path, args=["--region", "eu"], schedule="*/10 * * * *", owner="data-eng",
        tags=["orders", "sqs"], execution_timeout="1h",
    )  # fmt: skip
    dags = app_dags(settings)
    assert list(dags) == ["ackfold_app_billing", "ackfold_app_orders"]
    dag = dags["ackfold_app_orders"]
    assert dag.schedule.expression == "*/10 * * * *"
    assert dag.tags == {"ackfold", "app", "orders", "sqs"}
    assert dag.max_active_runs == 1, "one run at a time: one writer per checkpoint"
    assert dag.catchup is False
    assert dag.is_paused_upon_creation is None, (
        "the deployment's dags_are_paused_at_creation decides"
    )
    # Its first run is the schedule's next tick, not a past one run the moment it appears.
    assert first_run_after(dag) > datetime.now(UTC)
    (task,) = dag.tasks
    assert task.owner == "data-eng"
    assert task.task_type == "AckfoldSparkSubmitOperator"
    assert task._conn_id == "spark_default"
    assert task.application == str(tmp_path / "orders_app.py")
    assert task.application_args == ["--region", "eu"]
    assert task.execution_timeout == timedelta(hours=1)
    assert task.retries >= 1
    assert task.on_failure_callback
    assert [a.name for a in task.outlets] == ["ackfold_app_orders"]
    # Its driver knows the app it runs: a session from get_spark records its heartbeat.
    assert task.env_vars == {"ACKFOLD_APP": "orders"}
    # The defaults; a relative path is taken from the configuration file's directory.
    (billing,) = dags["ackfold_app_billing"].tasks
    assert dags["ackfold_app_billing"].schedule.expression == "0 * * * *"  # @hourly
    assert dags["ackfold_app_billing"].tags == {"ackfold", "app"}
    assert (billing.owner, billing.execution_timeout) == ("ackfold", None)
    assert billing.application == str(tmp_path / "jobs" / "billing.py")
    assert billing.application_args == []


def test_an_app_on_the_cluster_s_storage_is_passed_to_spark_submit_as_it_is(
    tmp_path: Path,
) -> None:
    for uri in ("s3a://pipelines/orders_app.py", "local:///opt/pipelines/orders_app.py"):
        settings = _settings(tmp_path, application=uri)
        (task,) = app_dags(settings)["ackfold_app_orders"].tasks
        assert task.application == uri
    # Through Spark Connect the task runs the file itself: it must be one.
    remote = settings.model_copy(
        update={"spark": settings.spark.model_copy(update={"remote": "sc://127.0.0.1:15002"})}
    )
    (task,) = app_dags(remote)["ackfold_app_orders"].tasks
    with pytest.raises(ConfigError, match=r"apps.orders.dag.application: with spark.remote"):
        task.execute(context={})


def test_the_reconcile_runs_on_its_cron_or_after_any_app_run(tmp_path: Path) -> None:
    from airflow.sdk import AssetAny, AssetOrTimeSchedule

    assert reconcile_schedule(SETTINGS) == "*/5 * * * *", "no app DAG: the cron alone"
    schedule = reconcile_schedule(_settings(tmp_path))
    assert isinstance(schedule, AssetOrTimeSchedule)
    assert isinstance(schedule.asset_condition, AssetAny), "any one app's run, not all"
    assert list(schedule.asset_condition.objects) == [app_asset("billing"), app_asset("orders")]
    assert schedule.timetable.expression == SETTINGS.airflow.reconcile_schedule


def test_an_app_whose_file_is_missing_fails_its_own_task(tmp_path: Path) -> None:
    settings = _settings(tmp_path, application=str(tmp_path / "nowhere.py"))
    dags = app_dags(settings)
    assert list(dags) == ["ackfold_app_billing", "ackfold_app_orders"], "both still declared"
    broken = dags["ackfold_app_orders"]
    assert "**Broken**: apps.orders.dag.application: no file" in broken.doc_md
    (task,) = broken.tasks
    with pytest.raises(ConfigError, match=r"apps.orders.dag.application: no file .*nowhere.py"):
        task.execute(context={})
    assert dags["ackfold_app_billing"].tasks[0].task_type == "AckfoldSparkSubmitOperator"


# The DAGs that must stay whatever is wrong with one app's.
OTHERS = ("ackfold_reconcile", "ackfold_replay", "ackfold_manual_replay", "ackfold_quality")


@pytest.fixture
def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """As a user configures it: the app's file, and an `apps:` entry in ackfold.yaml with
    its `dag:` (and another app without one). Returns the app's file."""
    app = tmp_path / "orders_app.py"
    app.write_text(APP)
    config = tmp_path / "ackfold.yaml"
    config.write_text(
        textwrap.dedent(f"""\
            apps:
              orders:
                timeout: 10m
                dag:
                  application: {app}
                  args: ["--from", "airflow"]
                  schedule: "@daily"
                  tags: [orders]
              billing:
                timeout: 1h
            """)
    )
    monkeypatch.setenv("ACKFOLD_CONFIG", str(config))
    return app


def _dag_folder():  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(PROJECT_DIR / "dags"))


def test_the_dag_folder_declares_each_configured_app(configured: Path) -> None:
    from airflow.sdk import AssetOrTimeSchedule

    bag = _dag_folder()
    assert bag.import_errors == {}
    assert {d for d in bag.dags if d.startswith("ackfold_app_")} == {"ackfold_app_orders"}
    assert bag.dags["ackfold_app_orders"].schedule.expression == "0 0 * * *"  # @daily
    assert isinstance(bag.dags["ackfold_reconcile"].schedule, AssetOrTimeSchedule)

    # A missing app file is that app's error, in its own task: every DAG still loads.
    configured.unlink()
    bag = _dag_folder()
    assert bag.import_errors == {}
    assert set(OTHERS) | {"ackfold_app_orders"} <= set(bag.dags)
    (task,) = bag.dags["ackfold_app_orders"].tasks
    with pytest.raises(ConfigError, match=r"apps.orders.dag.application: no file"):
        task.execute(context={})


def test_missing_jars_fail_the_spark_tasks_not_the_dag_file(
    configured: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scheduler without the jar cache parses every DAG; the app's run says what is
    missing and how to fill the cache when it runs."""
    from ackfold.spark.jars import JarsError

    monkeypatch.setenv("ACKFOLD_JARS_DIR", str(tmp_path / "no-jars"))
    bag = _dag_folder()
    assert bag.import_errors == {}
    assert set(OTHERS) | {"ackfold_app_orders"} <= set(bag.dags)
    (task,) = bag.dags["ackfold_app_orders"].tasks
    with pytest.raises(JarsError, match=r"no-jars.*make setup"):
        task.execute(context={})


def test_an_app_run_submits_the_app_and_updates_its_asset(configured: Path) -> None:
    import deltalake
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from sqlalchemy import func, select

    def asset_events() -> int:
        with create_session() as session:
            query = (
                select(func.count())
                .select_from(AssetEvent)
                .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                .where(AssetModel.name == "ackfold_app_orders")
            )
            return int(session.scalar(query) or 0)

    before = asset_events()
    run = _dag_folder().dags["ackfold_app_orders"].test()
    assert run.state == DagRunState.SUCCESS
    table = deltalake.DeltaTable(f"{SETTINGS.table_root}/orders_runs").to_pandas()
    assert sorted(table["arg"]) == ["--from", "airflow"], json.dumps(table.to_dict())
    assert asset_events() == before + 1, "the run's success is the reconcile's trigger"


def test_a_continuous_app_dag_is_one_supervised_long_task(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path, mode="continuous", args=["--region", "eu"], restart_backoff="10s",
        max_restart_delay="2m",
    )  # fmt: skip
    dag = app_dags(settings)["ackfold_app_orders"]
    assert type(dag.timetable).__name__ == "ContinuousTimetable"
    assert dag.max_active_runs == 1, "one run at a time: one driver per checkpoint"
    assert "continuous" in dag.tags
    assert dag.is_paused_upon_creation is None, (
        "the deployment's dags_are_paused_at_creation decides"
    )
    (task,) = dag.tasks
    assert task.application_args == ["--region", "eu", "--continuous"]
    assert task.env_vars == {"ACKFOLD_APP": "orders"}
    # Restarted when it fails, with a doubling backoff, for as long as it fails.
    assert task.retries >= 10_000
    assert task.retry_delay == timedelta(seconds=10)
    assert task.retry_exponential_backoff
    assert task.max_retry_delay == timedelta(minutes=2)
    assert list(task.outlets) == [], "no asset: the reconcile keeps its own schedule"
    # The reconcile follows only the available_now app (billing) on its asset.
    schedule = reconcile_schedule(settings)
    assert list(schedule.asset_condition.objects) == [app_asset("billing")]
