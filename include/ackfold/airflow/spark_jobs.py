"""How an Airflow task runs a job of ackfold's: in the task's own process on the
embedded engine; on Spark, spark-submit of its entry point (`ackfold.jobs`, found
in the installed package) on the `spark_default` connection, or, with `spark.remote`
set, that entry point in the task's own process through Spark Connect. Airflow is
imported inside the functions that need it."""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ackfold.airflow.compat import airflow_exception, not_found_exception
from ackfold.airflow.connections import SPARK_CONN_ID, kafka_credential_env, with_kafka_connection
from ackfold.airflow.tasks import one_line_errors
from ackfold.config import ConfigError, Settings, load_settings
from ackfold.jobs import app_path
from ackfold.spark import spark_conf, spark_jars
from ackfold.spark.session import APP_ENV

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator


def spark_submit_kwargs(
    app: str,
    settings: Settings | None = None,
    *,
    args: list[str] | None = None,
    tracked: str | None = None,
    jars: bool = True,
) -> dict[str, Any]:
    """SparkSubmitOperator arguments that run the entry point `app` (or the absolute path
    `app`) with ackfold's Spark setup; for a tracked app's own run, `tracked` names it to
    its driver (`ACKFOLD_APP`: its session records the app's heartbeat). `jars=False`
    leaves the jars out, for an operator that resolves them when it runs."""
    settings = settings or load_settings()
    conf = spark_conf(settings, with_jars=False)
    # Client mode: the driver's Python is this interpreter, with ackfold on it.
    conf.setdefault("spark.pyspark.driver.python", sys.executable)
    return {
        "conn_id": SPARK_CONN_ID,
        "application": app if is_uri(app) else str(app_path(app)),
        **({"jars": ",".join(spark_jars(settings))} if jars else {}),
        "conf": conf,
        "name": f"ackfold-{Path(app).stem}",
        "application_args": args or [],
        "verbose": False,
        "env_vars": {**kafka_credential_env(settings), **({APP_ENV: tracked} if tracked else {})},
    }


def is_uri(application: str) -> bool:
    """Whether spark-submit fetches `application` itself (`s3a://...`, `local:///...`)."""
    return "://" in application or application.startswith("local:")


def spark_job(
    task_id: str,
    app: str,
    settings: Settings,
    *,
    args: list[str] | None = None,
    tracked: str | None = None,
    problem: str | None = None,
    **operator: Any,
) -> BaseOperator:
    """The task that runs the entry point `app` (or the app at the absolute path `app`):
    spark-submit on `spark_default`, its jars resolved when it runs
    (`AckfoldSparkSubmitOperator`), or, with `spark.remote` set, the same entry point in
    the task's own process, its session on the Spark Connect endpoint
    (`connect_endpoint`). `tracked`: the tracked app a run of its own DAG runs, named to
    its driver (its heartbeat). `problem`: what is wrong with the app's configuration,
    which the task raises when it runs instead (the DAG file, and every other DAG in it,
    still loads). `operator`: the operator's own arguments (outlets, ...)."""
    if problem is not None:
        from airflow.providers.standard.operators.python import PythonOperator

        return PythonOperator(
            task_id=task_id, python_callable=refuse, op_args=[problem], **operator
        )
    if settings.spark.remote:
        from airflow.providers.standard.operators.python import PythonOperator

        return PythonOperator(
            task_id=task_id,
            python_callable=run_spark_app,
            op_args=[app, list(args or []), tracked],
            **operator,
        )
    try:
        from ackfold.airflow.spark_submit import AckfoldSparkSubmitOperator
    except ImportError:
        raise ImportError(
            f"task {task_id!r} spark-submits {app}, which needs Airflow's Spark provider: "
            "install ackfold[airflow-spark] (or set engine.kind: embedded)"
        ) from None
    return AckfoldSparkSubmitOperator(
        task_id=task_id,
        settings=settings,
        **spark_submit_kwargs(app, settings, args=args, tracked=tracked, jars=False),
        **operator,
    )


def refuse(problem: str) -> None:
    """The body of a task whose configuration is wrong: fail with what is wrong."""
    raise ConfigError(problem)


def engine_job(
    task_id: str,
    app: str,
    settings: Settings,
    run: Callable[..., Any],
    *,
    args: list[str] | None = None,
    **operator: Any,
) -> BaseOperator:
    """The task of a job that runs on any engine (`engine.kind`): `run` in the task's
    own process on an engine that runs there (`Engine.runs_in_task`: the embedded one, no
    JVM, no spark-submit), else `spark_job` of the entry point `app`, which calls the
    same run function."""
    from ackfold.engines import choose

    if choose(settings, refuse=False).runs_in_task:  # the job refuses where it runs
        from airflow.providers.standard.operators.python import PythonOperator

        return PythonOperator(task_id=task_id, python_callable=run, **operator)
    return spark_job(task_id, app, settings, args=args, **operator)


def connect_endpoint(settings: Settings) -> str:
    """The Spark Connect URL of a task: the Airflow connection
    `airflow.spark_connect_conn_id` (where a token belongs), else `spark.remote`."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    try:
        return str(SparkConnectHook(settings.airflow.spark_connect_conn_id).get_connection_url())
    except not_found_exception():
        assert settings.spark.remote is not None
        return settings.spark.remote


@one_line_errors
def run_spark_app(app: str, args: list[str], tracked: str | None = None) -> None:
    """Run the entry point `app` (or the absolute path `app`) in this process, as
    spark-submit would, through Spark Connect: a task process of its own, so its
    environment and argv are the job's (`tracked`: the tracked app it runs). An
    `AckfoldError` of the job ends the task as one line (`one_line_errors`)."""
    settings = load_settings()
    os.environ["ACKFOLD_SPARK__REMOTE"] = connect_endpoint(settings)
    if tracked:
        os.environ[APP_ENV] = tracked
    # The Kafka login of `kafka.airflow_connection`, as spark-submit gets it (env_vars).
    kafka = with_kafka_connection(settings).kafka
    if settings.kafka.airflow_connection and kafka.sasl_username:
        os.environ["ACKFOLD_KAFKA__SASL_USERNAME"] = kafka.sasl_username
    if settings.kafka.airflow_connection and kafka.sasl_password:
        os.environ["ACKFOLD_KAFKA__SASL_PASSWORD"] = kafka.sasl_password.get_secret_value()
    script = app_path(app)
    sys.argv = [str(script), *args]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:  # the entry point's own exit status, as spark-submit's
        if isinstance(exc.code, str):  # its one line (`ackfold.jobs.one_line_errors`)
            raise airflow_exception()(exc.code) from None
        if exc.code not in (0, None):
            raise airflow_exception()(f"{script} exited with {exc.code}") from None
