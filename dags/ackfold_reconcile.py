"""ackfold_reconcile: fold the new ledger events into root_state, on a schedule."""

from datetime import UTC, datetime

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

from ackfold.config import load_settings
from ackfold.dags import LEDGER_POOL, default_args, root_state_asset, spark_submit_kwargs

settings = load_settings()

with DAG(
    dag_id="ackfold_reconcile",
    doc_md="""
### ackfold reconcile
Folds the `ack_events` appended since the last run into `root_state`, XOR per root (Storm's
acker, in batch), then re-classifies the roots still in flight: each root becomes
`completed`, `failed`, `timed_out` (not complete within its app's `timeout`) or stays
`pending`.

- **Runs** on `airflow.reconcile_schedule` (default every 5 minutes), one run at a time;
  it is unpaused from the start. Trigger it by hand any time: a run only reads what is new.
- **Reads** `ack_events` (a Delta stream with a checkpoint under
  `<warehouse>/_checkpoints/reconcile`), `roots`, `unmatched_events`, `root_state`.
- **Writes** `root_state` (the `ackfold_root_state` asset: each successful run triggers
  `ackfold_replay`) and `unmatched_events` (events whose root is not registered yet).
- The task submits `spark_apps/reconcile.py` on `spark_default`; its last log
  line is the run's JSON summary (events read, duplicates dropped, roots by status).
""",
    schedule=settings.airflow.reconcile_schedule,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,
    default_args=default_args(),
    tags=["ackfold", "reconcile"],
):
    SparkSubmitOperator(
        task_id="reconcile",
        pool=LEDGER_POOL,
        outlets=[root_state_asset(settings)],
        **spark_submit_kwargs("reconcile.py", settings),
    )
