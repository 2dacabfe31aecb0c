"""ackfold_quality: Great Expectations checks of the delivery guarantees, after every
reconcile."""

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG, task

from ackfold.config import load_settings
from ackfold.dags import (
    default_args,
    quality_alerts,
    quality_check,
    quality_verdict,
    root_state_asset,
)
from ackfold.embedded import SPARK, engine_for
from ackfold.spark_tasks import spark_job

settings = load_settings()

with DAG(
    dag_id="ackfold_quality",
    doc_md="""
### ackfold quality
Checks, with Great Expectations, that the at-least-once promise held, and that the ledger
itself is sound, over the last `quality.window` (default 2 days):

- **Ledger**: schema and types, no nulls where the contract forbids them, `kind` and
  `status` in their domains, `event_id` and `root_id` unique, valid origin chains,
  attempts within `max_attempts`, XOR 0 for every completed root, a reason for every
  failed one.
- **Delivery, per app**: no lost roots (older than timeout plus `grace`, and neither
  completed, replayed nor dead-lettered), every message a producer reported sent is
  registered, duplicate rate, dead-letter rate and complete-latency p99 within the app's
  thresholds (`defaults.quality`, `apps.<app>.quality`).

- **Runs** whenever `ackfold_reconcile` updates the `ackfold_root_state` asset.
- `check` runs the checks in the task's own process on the embedded engine (DuckDB, no
  JVM), or submits `spark_apps/quality.py` when `engine.kind` is `spark`: one
  `quality_results` row per expectation, and Data Docs (the Reliability UI's *Quality*
  page links them).
- `verdict` fails when any expectation failed, listing each with its observed value.
- `alerts` (beside the verdict, after any check) sends one message per app when its checks
  start failing and one when they pass again (`alerts.*`, `apps.<app>.alerts.quality`).
""",
    schedule=[root_state_asset(settings)],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,
    default_args=default_args(),
    tags=["ackfold", "quality"],
):
    if engine_for(settings) == SPARK:
        check = spark_job(
            "check", "quality.py", settings, args=["--airflow-run-id", "{{ run_id }}"]
        )
    else:

        @task(task_id="check")
        def check_embedded() -> dict[str, object]:
            from airflow.sdk import get_current_context

            return quality_check(get_current_context()["run_id"])

        check = check_embedded()

    @task
    def verdict() -> dict[str, object]:
        from airflow.sdk import get_current_context

        return quality_verdict(get_current_context()["run_id"])

    # Beside the verdict, not after it: a failed verdict stays a leaf and fails the run.
    # After the check however it ended (a check that wrote nothing changes no alert).
    @task(trigger_rule="all_done")
    def alerts(**context: Any) -> dict[str, object]:
        return quality_alerts(context)

    check >> [verdict(), alerts()]
