"""How an Airflow task runs a Spark job of ackfold's (`spark_apps/`): spark-submit on the
`spark_default` connection, or, with `spark.remote` set, the job's entry point in the
task's own process through Spark Connect; and the connections and Kafka credentials
those tasks take. Airflow is imported inside the functions that need it."""

from __future__ import annotations

import json
import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings, load_settings
from ackfold.spark import spark_conf, spark_jars

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator

SPARK_APPS = Path(__file__).resolve().parents[2] / "spark_apps"
SPARK_CONN_ID = "spark_default"


def spark_connection(settings: Settings) -> dict[str, Any]:
    """The `spark_default` connection for the configured master, in Airflow's JSON form."""
    return {
        "conn_type": "spark",
        "host": settings.spark.master,
        "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"},
    }


def spark_connection_json(settings: Settings) -> str:
    return json.dumps(spark_connection(settings))


def spark_submit_kwargs(
    app: str, settings: Settings | None = None, *, args: list[str] | None = None
) -> dict[str, Any]:
    """SparkSubmitOperator arguments that run `spark_apps/<app>` (or the absolute path
    `app`) with ackfold's Spark setup."""
    settings = settings or load_settings()
    conf = spark_conf(settings, with_jars=False)
    # Client mode: the driver's Python is this interpreter, with ackfold on it.
    conf.setdefault("spark.pyspark.driver.python", sys.executable)
    return {
        "conn_id": SPARK_CONN_ID,
        "application": app if is_uri(app) else str(SPARK_APPS / app),
        "jars": ",".join(spark_jars(settings)),
        "conf": conf,
        "name": f"ackfold-{Path(app).stem}",
        "application_args": args or [],
        "verbose": False,
        "env_vars": kafka_credential_env(settings),
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
    **operator: Any,
) -> BaseOperator:
    """The task that runs `spark_apps/<app>` (or the app at the absolute path `app`):
    spark-submit on `spark_default`, or, with `spark.remote` set, the same entry point in
    the task's own process, its session on the Spark Connect endpoint
    (`connect_endpoint`). `operator`: the operator's own arguments (outlets, ...)."""
    if settings.spark.remote:
        from airflow.providers.standard.operators.python import PythonOperator

        return PythonOperator(
            task_id=task_id,
            python_callable=run_spark_app,
            op_args=[app, list(args or [])],
            **operator,
        )
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(
        task_id=task_id, **spark_submit_kwargs(app, settings, args=args), **operator
    )


def engine_job(
    task_id: str,
    app: str,
    settings: Settings,
    run: Callable[[], Any],
    *,
    args: list[str] | None = None,
    **operator: Any,
) -> BaseOperator:
    """The task of a job that runs on either engine (`engine.kind`): `run` in the task's
    own process on the embedded engine (no JVM, no spark-submit), else `spark_job` of
    `spark_apps/<app>`."""
    from ackfold.embedded import EMBEDDED, engine_for

    if engine_for(settings) == EMBEDDED:
        from airflow.providers.standard.operators.python import PythonOperator

        return PythonOperator(task_id=task_id, python_callable=run, **operator)
    return spark_job(task_id, app, settings, args=args, **operator)


def connect_endpoint(settings: Settings) -> str:
    """The Spark Connect URL of a task: the Airflow connection
    `airflow.spark_connect_conn_id` (where a token belongs), else `spark.remote`."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return str(SparkConnectHook(settings.airflow.spark_connect_conn_id).get_connection_url())
    except AirflowNotFoundException:
        assert settings.spark.remote is not None
        return settings.spark.remote


def run_spark_app(app: str, args: list[str]) -> None:
    """Run `spark_apps/<app>` (or the absolute path `app`) in this process, as
    spark-submit would, through Spark Connect: a task process of its own, so its
    environment and argv are the job's."""
    from airflow.sdk.exceptions import AirflowException

    settings = load_settings()
    os.environ["ACKFOLD_SPARK__REMOTE"] = connect_endpoint(settings)
    # The Kafka login of `kafka.airflow_connection`, as spark-submit gets it (env_vars).
    kafka = with_kafka_connection(settings).kafka
    if settings.kafka.airflow_connection and kafka.sasl_username:
        os.environ["ACKFOLD_KAFKA__SASL_USERNAME"] = kafka.sasl_username
    if settings.kafka.airflow_connection and kafka.sasl_password:
        os.environ["ACKFOLD_KAFKA__SASL_PASSWORD"] = kafka.sasl_password.get_secret_value()
    script = SPARK_APPS / app
    sys.argv = [str(script), *args]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:  # the entry point's own exit status, as spark-submit's
        if exc.code not in (0, None):
            raise AirflowException(f"{script} exited with {exc.code}") from None


def spark_connect_connection(remote: str) -> dict[str, Any]:
    """`spark.remote` as Airflow's `spark_connect` connection (JSON form): host, port,
    the user id as login, the token as password, `use_ssl` in the extras.

    Example:
        >>> found = spark_connect_connection("sc://spark.example.com:443/;use_ssl=true;token=x")
        >>> found["host"], found["port"], found["password"], found["extra"]
        ('spark.example.com', 443, 'x', {'use_ssl': True})
    """
    from ackfold.spark import connect_address

    host, port = connect_address(remote)
    params = dict(
        part.split("=", 1) for part in remote.partition("/;")[2].split(";") if "=" in part
    )
    extra = {"use_ssl": params["use_ssl"].lower() == "true"} if "use_ssl" in params else {}
    return {
        "conn_type": "spark_connect",
        "host": host,
        "port": port,
        "login": params.get("user_id"),
        "password": params.get("token"),
        "extra": extra,
    }


def kafka_credential_env(settings: Settings) -> dict[str, str]:
    """The environment that hands a spark-submit the Kafka login and password of the
    Airflow connection `kafka.airflow_connection`: templates Airflow renders when the task
    runs (`{{ conn.<id>.password }}`), so no secret is in a DAG file, and Airflow masks it
    in logs and rendered fields. Empty without that setting."""
    name = settings.kafka.airflow_connection
    if name is None:
        return {}
    return {
        "ACKFOLD_KAFKA__SASL_USERNAME": f"{{{{ conn[{name!r}].login }}}}",
        "ACKFOLD_KAFKA__SASL_PASSWORD": f"{{{{ conn[{name!r}].password }}}}",
    }


def with_kafka_connection(settings: Settings) -> Settings:
    """`settings` with the Kafka login and password of the Airflow connection
    `kafka.airflow_connection` (inside a task, which may read connections); unchanged
    without that setting."""
    name = settings.kafka.airflow_connection
    if name is None:
        return settings
    from airflow.sdk import BaseHook
    from pydantic import SecretStr

    connection = BaseHook.get_connection(name)
    update = {
        "sasl_username": connection.login or None,
        "sasl_password": SecretStr(connection.password) if connection.password else None,
    }
    return settings.model_copy(update={"kafka": settings.kafka.model_copy(update=update)})
