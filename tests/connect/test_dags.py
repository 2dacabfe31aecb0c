"""The DAGs through Spark Connect: with `spark.remote` set, `ackfold_smoke`'s task runs
`ackfold/jobs/smoke.py` in the task's process, its endpoint the Airflow `spark_connect`
connection, and succeeds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ackfold.airflow.connections import spark_connect_connection
from tests.conftest import JARS_DIR, PROJECT_DIR

# In a child of its own: Airflow reads its configuration once, at import, and this test
# needs an AIRFLOW_HOME, a connection and ACKFOLD_SPARK__REMOTE of its own.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils.state import DagRunState
    dag = DagBag(dag_folder=sys.argv[1]).dags["ackfold_smoke"]
    run = dag.test()
    print(json.dumps({"state": str(run.state), "task": dag.tasks[0].task_type}))
    """
)


def _smoke_dag(remote: str, connection: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACKFOLD_", "AIRFLOW"))}
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(PROJECT_DIR / "dags"),  # dag.test() syncs this bundle
        AIRFLOW_CONN_SPARK_CONNECT_DEFAULT=connection,
        ACKFOLD_SPARK__REMOTE=remote,
        ACKFOLD_VAR_DIR=str(tmp_path / "var"),
        ACKFOLD_JARS_DIR=str(JARS_DIR),
    )
    migrate = [str(Path(bin_dir) / "airflow"), "db", "migrate"]
    subprocess.run(migrate, env=env, check=True, capture_output=True, timeout=600)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(PROJECT_DIR / "dags")], env=env,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_smoke_dag_runs_through_connect_on_the_connection_endpoint(
    connect_url: str, tmp_path: Path
) -> None:
    # spark.remote says "Connect"; the connection says where (the token would be there).
    connection = json.dumps(spark_connect_connection(connect_url))
    result = _smoke_dag("sc://spark.invalid:15002", connection, tmp_path)
    assert result == {"state": "success", "task": "PythonOperator"}
    import deltalake

    table = deltalake.DeltaTable(str(tmp_path / "var" / "warehouse" / "smoke")).to_pandas()
    assert dict(zip(table["word"], table["n"], strict=True)) == {"storm": 1, "spark": 3, "delta": 1}
