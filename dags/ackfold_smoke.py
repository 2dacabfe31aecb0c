"""ackfold_smoke: one spark-submit that proves Spark, Delta and the warehouse work."""

from datetime import datetime

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

from ackfold.dags import default_args, spark_submit_kwargs

with DAG(
    dag_id="ackfold_smoke",
    doc_md="""
### ackfold smoke test
Submits `spark_apps/smoke.py` through the `spark_default` connection. The job creates a
Delta table with an explicit schema in the warehouse, appends, MERGEs, time-travels and
reads it back, and fails unless it reads exactly what it wrote. It runs once when the
stack first starts; trigger it again any time to check an environment.
""",
    schedule="@once",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    is_paused_upon_creation=False,
    default_args=default_args(),
    tags=["ackfold", "smoke"],
):
    SparkSubmitOperator(task_id="delta_round_trip", **spark_submit_kwargs("smoke.py"))
