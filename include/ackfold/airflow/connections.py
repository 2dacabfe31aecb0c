"""The connections ackfold's tasks use: `spark_default` and `spark_connect` in Airflow's
JSON form, and the Kafka login of the Airflow connection `kafka.airflow_connection`,
handed to spark-submit as templates or read inside a task. Airflow is imported inside
the functions that need it."""

from __future__ import annotations

import json
from typing import Any

from ackfold.config import Settings

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
    from pydantic import SecretStr

    from ackfold.airflow.compat import base_hook

    connection = base_hook().get_connection(name)
    update = {
        "sasl_username": connection.login or None,
        "sasl_password": SecretStr(connection.password) if connection.password else None,
    }
    return settings.model_copy(update={"kafka": settings.kafka.model_copy(update=update)})
