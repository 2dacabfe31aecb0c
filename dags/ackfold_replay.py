"""ackfold_replay: the automatic replay, after every reconcile."""

from datetime import UTC, datetime

from airflow.sdk import DAG

from ackfold.config import load_settings
from ackfold.dags import LEDGER_POOL, default_args, root_state_asset, run_automatic_replay
from ackfold.spark_tasks import engine_job

settings = load_settings()

with DAG(
    dag_id="ackfold_replay",
    doc_md="""
### ackfold automatic replay
Sends the `failed` and `timed_out` roots back to their source queue as new attempts,
under each app's policy (`apps.<app>` over `defaults`): attempt k waits
`replay_backoff * 2**(k-1)` after its failure, at most `replay_rate` messages per second,
at most `replay.max_per_run` per run. A root out of attempts (`max_attempts`) is
dead-lettered instead: a `dead_letters` row and a copy in its dead-letter queue.

- **Runs** whenever `ackfold_reconcile` updates the `ackfold_root_state` asset; trigger it
  by hand to replay without waiting for the next reconcile.
- **Reads** `root_state`, `roots` (the payloads), `replay_log`.
- **Writes** `replay_log` (each send `planned` before it is sent, then `sent` or
  `failed`), `root_state` (`replayed`, `dead_lettered`), `dead_letters`, and the SQS queues.
- The task runs on the engine `engine.kind` chooses: the embedded one (DuckDB and delta-rs
  in the task's own process, no JVM), or Spark (it submits `spark_apps/replay.py --auto`
  on `spark_default`). Its log ends with the run's JSON summary. It fails, naming the
  error, if messages could not be sent: they stay planned in `replay_log`, and the next
  run sends exactly those.
- For replays chosen by a person, use `ackfold_manual_replay`.
""",
    schedule=[root_state_asset(settings)],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,
    default_args=default_args(),
    tags=["ackfold", "replay"],
):
    engine_job(
        "replay", "replay.py", settings, run_automatic_replay, args=["--auto"], pool=LEDGER_POOL
    )
