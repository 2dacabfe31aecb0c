"""ackfold_manual_replay: replay the roots a person picks, from a form (or the UI plugin)."""

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG, get_current_context, task

from ackfold.config import load_settings
from ackfold.dags import (
    LEDGER_POOL,
    MANUAL_PRIORITY,
    default_args,
    manual_replay_params,
    requester,
    run_manual_replay,
    validate_manual_conf,
)
from ackfold.replay.params import MANUAL_REPLAY_DAG_ID

settings = load_settings()

with DAG(
    dag_id=MANUAL_REPLAY_DAG_ID,
    doc_md="""
### ackfold manual replay
Sends the roots you pick back to their source queue as new attempts, whatever their app's
`max_attempts` and backoff (a person decided). **Dry run is on by default**: the run then
logs and returns what it would send, and sends nothing; untick it to send.

- **Trigger** it with *Trigger* and fill in the form (root ids, or filters: app,
  statuses, status-change time range, limit; the send rate), from the Reliability UI's
  replay button, or over the REST API with the same keys in `conf`
  (`ackfold.replay.params.CONF_KEYS`). A request with no root id, app or time range
  needs a limit to send. `dead_lettered` roots can be brought back this way.
- **validate** checks the conf again (REST calls skip the form) and fails at once, naming
  each bad field and its fix. **replay** plans, logs each send (root, status, target;
  never a payload), sends at the rate asked (or the app's `replay_rate`), and returns
  the summary: the task's return value (XCom `return_value`) in the UI.
- **Reads** `root_state`, `roots`, `replay_log`; **writes** `replay_log` (a dry run's
  rows are marked `dry_run`), `root_state` (`replayed`), `dead_letters` (redrives) and
  the queues. `requested_by` in `replay_log` is `airflow:<the user who triggered>`.

Why the replay runs in the task, not through spark-submit: one task plans, sends and
returns the exact summary (selected, sent, skipped and why, the sends themselves) as its
return value, with nothing to read back from the ledger afterwards. It starts Spark with
the same settings as the CLI (`spark.master`, so a cluster works as with spark-submit in
client mode); the work is small: a manual replay touches the roots picked, not the ledger.
""",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    is_paused_upon_creation=False,  # a paused DAG's triggered runs never start
    default_args=default_args(),
    params=manual_replay_params(settings),
    tags=["ackfold", "replay"],
):

    @task(priority_weight=MANUAL_PRIORITY, weight_rule="absolute")
    def validate() -> dict[str, Any]:
        return validate_manual_conf(get_current_context()["dag_run"].conf, settings)

    @task(pool=LEDGER_POOL, priority_weight=MANUAL_PRIORITY, weight_rule="absolute")
    def replay(conf: dict[str, Any]) -> dict[str, Any]:
        requested_by = requester(get_current_context()["dag_run"])
        return run_manual_replay(conf, requested_by, settings)

    replay(validate())
