"""What ackfold's DAG files share: default arguments, the failure hook, spark-submit settings.

DAG files stay declarations; everything they compute comes from here, so tests can call
it without a scheduler.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from ackfold.config import Settings, load_settings
from ackfold.spark import spark_conf, spark_jars

log = logging.getLogger("ackfold.dags")

PROJECT_DIR = Path(__file__).resolve().parents[2]
SPARK_APPS = PROJECT_DIR / "spark_apps"
SPARK_CONN_ID = "spark_default"


def on_failure(context: dict[str, Any]) -> None:
    """Failure hook every ackfold task carries: one log line with what failed and where.

    Point alerting (Slack, PagerDuty, email) at this line, or wrap this function.
    """
    ti = context.get("task_instance") or context.get("ti")
    log.error(
        "ackfold task failed: dag=%s task=%s run=%s try=%s error=%s",
        getattr(ti, "dag_id", "?"),
        getattr(ti, "task_id", "?"),
        context.get("run_id", "?"),
        getattr(ti, "try_number", "?"),
        _first_line(context.get("exception")),
    )


def _first_line(exception: object) -> str:
    # Only the type and first line: an error text can quote the records it choked on.
    if exception is None:
        return "-"
    text = str(exception).strip().splitlines()
    return f"{type(exception).__name__}: {text[0][:200] if text else ''}"


def default_args() -> dict[str, Any]:
    """Retries for transient faults (a busy JVM, a queue restarting), and the failure hook."""
    return {
        "owner": "ackfold",
        "retries": 2,
        "retry_delay": timedelta(seconds=30),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=5),
        "on_failure_callback": on_failure,
    }


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
    """SparkSubmitOperator arguments that run `spark_apps/<app>` with ackfold's Spark setup."""
    settings = settings or load_settings()
    conf = spark_conf(settings, with_jars=False)
    # Client mode: the driver's Python is this interpreter, with ackfold on it.
    conf.setdefault("spark.pyspark.driver.python", sys.executable)
    return {
        "conn_id": SPARK_CONN_ID,
        "application": str(SPARK_APPS / app),
        "jars": ",".join(spark_jars(settings)),
        "conf": conf,
        "name": f"ackfold-{Path(app).stem}",
        "application_args": args or [],
        "verbose": False,
    }
