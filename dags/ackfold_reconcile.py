"""ackfold_reconcile: fold the new ledger events into root_state, on a schedule."""

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG, task

from ackfold.app_dags import reconcile_schedule
from ackfold.config import load_settings
from ackfold.dags import (
    LEDGER_POOL,
    default_args,
    ledger_metrics,
    reconcile_in_task,
    root_state_asset,
    state_alerts,
)
from ackfold.spark_tasks import engine_job

settings = load_settings()

with DAG(
    dag_id="ackfold_reconcile",
    doc_md="""
### ackfold reconcile
Folds the `ack_events` appended since the last run into `root_state`, XOR per root (Storm's
acker, in batch), then re-classifies the roots still in flight: each root becomes
`completed`, `failed`, `timed_out` (not complete within its app's `timeout`) or stays
`pending`.

- **Runs** on `airflow.reconcile_schedule` (default every 5 minutes), and after every
  successful run of an app's DAG (`ackfold_app_<app>`), one run at a time; it is unpaused
  from the start. Trigger it by hand any time: a run only reads what is new.
- **Reads** `ack_events` (a Delta stream with a checkpoint under
  `<warehouse>/_checkpoints/reconcile`), `roots`, `unmatched_events`, `root_state`.
- **Writes** `root_state` (the `ackfold_root_state` asset: each successful run triggers
  `ackfold_replay`) and `unmatched_events` (events whose root is not registered yet).
- `reconcile` runs on the engine `engine.kind` chooses: by default the embedded one
  (DuckDB over delta-rs) in the task's own process, with no JVM; with `spark`, it
  submits `spark_apps/reconcile.py` on `spark_default`. Its last log line is the run's
  JSON summary (events read, duplicates dropped, roots by status, the engine).
- `alerts` holds each app's thresholds (`defaults.alerts`, `apps.<app>.alerts`) against
  `root_state` and sends one message when a breach opens and one when it resolves, by
  e-mail and webhook (`alerts.*`; no JVM).
- `metrics` pushes roots by status, the oldest pending root's age and the time to detect
  over OTLP, when `metrics.endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set (no JVM).
""",
    schedule=reconcile_schedule(settings),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,
    default_args=default_args(),
    tags=["ackfold", "reconcile"],
):
    reconcile = engine_job(
        "reconcile",
        "reconcile.py",
        settings,
        reconcile_in_task,
        pool=LEDGER_POOL,
        outlets=[root_state_asset(settings)],
    )

    @task
    def alerts(**context: Any) -> dict[str, object]:
        return state_alerts(context)

    @task
    def metrics(**context: Any) -> dict[str, object]:
        return ledger_metrics(context)

    reconcile >> [alerts(), metrics()]
