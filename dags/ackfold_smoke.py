"""ackfold_smoke: one Spark job that proves Spark, Delta and the warehouse work."""

from datetime import datetime

from airflow.sdk import DAG

from ackfold.config import load_settings
from ackfold.dags import default_args
from ackfold.spark_tasks import spark_job

settings = load_settings()

with DAG(
    dag_id="ackfold_smoke",
    doc_md="""
### ackfold smoke test
Runs `spark_apps/smoke.py`: spark-submit on the `spark_default` connection, or through
Spark Connect when `spark.remote` is set. The job creates a
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
    spark_job("delta_round_trip", "smoke.py", settings)
