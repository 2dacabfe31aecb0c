"""The Airflow tier runs against a throwaway AIRFLOW_HOME set up exactly as `make run` does."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import pytest

from ackfold.airflow.connections import spark_connection_json
from ackfold.airflow.defaults import LEDGER_POOL, LEDGER_POOL_DESCRIPTION
from ackfold.config import load_settings
from ackfold_dev.stack import airflow_environment
from tests.conftest import JARS_DIR

# Airflow reads its configuration when first imported: set it before any test imports it.
_VAR = Path(tempfile.mkdtemp(prefix="ackfold-airflow-tests-"))
SETTINGS = load_settings(var_dir=_VAR, jars_dir=JARS_DIR, spark={"master": "local[2]"})
# Only what Airflow and its spark-submit children need: the rest of the ACKFOLD_* settings
# derive from ACKFOLD_VAR_DIR, and must not leak into the other tiers' explicit settings.
_ENV = airflow_environment(SETTINGS)
os.environ.update(
    {k: v for k, v in _ENV.items() if k not in ("ACKFOLD_WAREHOUSE", "ACKFOLD_AIRFLOW_HOME")}
)
os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = spark_connection_json(SETTINGS)


@pytest.fixture(scope="session", autouse=True)
def airflow_db() -> None:
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, env=os.environ)
    # As `make run` does (`prepare_airflow`): the ledger writers' tasks run in this pool.
    subprocess.run(
        [airflow, "pools", "set", LEDGER_POOL, "1", LEDGER_POOL_DESCRIPTION],
        check=True, capture_output=True, env=os.environ,
    )  # fmt: skip


# The alert tests' real SMTP server, webhook and the connections to them.
from tests.alert_fixtures import connections, smtp, webhook  # noqa: E402, F401


def first_run_after(dag) -> datetime:  # type: ignore[no-untyped-def]
    """When the scheduler would start the DAG's first scheduled run, as it computes it
    from the serialized DAG."""
    from airflow.serialization.serialized_objects import DagSerialization

    serialized = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    info = serialized.next_dagrun_info(last_automated_run_info=None)
    assert info is not None, f"{dag.dag_id} is never scheduled"
    return info.run_after
