"""ackfold_maintenance: retention, OPTIMIZE and VACUUM of the ledger."""

from airflow.sdk import DAG

from ackfold.config import load_settings
from ackfold.dags import LEDGER_POOL, default_args, from_next_tick
from ackfold.spark_tasks import spark_job

settings = load_settings()

with DAG(
    dag_id="ackfold_maintenance",
    doc_md="""
### ackfold maintenance
Keeps the ledger small and fast to read:

1. **Retention**: deletes the `ack_events` of roots that are `completed` (or
   `completed_late`) and have had no event for `maintenance.retention` (default 30 days).
   Their `roots` and `root_state` rows stay; roots in any other status keep every event.
2. **OPTIMIZE**: Z-orders `ack_events` and `roots` by `root_id` (fast `ackfold show` and
   UI lookups), compacts `replay_log`.
3. **VACUUM** every ledger table, keeping `maintenance.vacuum_retention` (default 7 days).

- **Runs** on `airflow.maintenance_schedule` (default daily); trigger it by hand any time.
- **Reads** `root_state`; **rewrites** `ack_events`, `roots`, `replay_log`; vacuums all.
  Safe while apps and the reconciler run: the tables stay at reader version 1 (no
  deletion vectors), and the reconciler's stream skips the retention's delete commits.
- The task submits `spark_apps/maintenance.py` on `spark_default`; its last log line is
  the JSON summary (roots expired, events deleted).
""",
    schedule=from_next_tick(settings.airflow.maintenance_schedule),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,
    default_args=default_args(),
    tags=["ackfold", "maintenance"],
):
    spark_job("maintain", "maintenance.py", settings, pool=LEDGER_POOL)
