"""What every ackfold DAG shares: default arguments and the failure hook, the ledger's
pool, the schedule that starts at its next tick. Airflow is
imported inside the functions that need it: the CLI imports this module too."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any, Final

from ackfold.config import load_settings

log = logging.getLogger("ackfold.airflow")

# The Airflow pool of the tasks that write root_state or rewrite the ledger (reconcile,
# replays, maintenance): one slot, so Airflow runs them one at a time on any number of
# workers, queued rather than blocking a worker on the ledger's lease.
LEDGER_POOL: Final = "ackfold_ledger"
LEDGER_POOL_DESCRIPTION: Final = "ackfold: reconciles, replays and maintenance take turns"
# A person's replay goes first in that pool: queued behind every scheduled reconcile, a
# one-root replay by hand waited 40 minutes (the scheduler gives a free slot to the
# queued task of highest weight; the scheduled tasks' weights are their few downstreams).
MANUAL_PRIORITY: Final = 100


def on_failure(context: dict[str, Any]) -> None:
    """Failure hook every ackfold task carries: one log line with what failed and where,
    and the same on the alert channels (`alerts.*`), if any."""
    ti = context.get("task_instance") or context.get("ti")
    log.error(
        "ackfold task failed: dag=%s task=%s run=%s try=%s error=%s",
        getattr(ti, "dag_id", "?"),
        getattr(ti, "task_id", "?"),
        context.get("run_id", "?"),
        getattr(ti, "try_number", "?"),
        _first_line(context.get("exception")),
    )
    try:
        from ackfold.alerts import notify_failure

        notify_failure(context, load_settings())
    except Exception as exc:  # a hook must not raise: the failure is logged above
        log.error("failure alert not sent: %s", _first_line(exc))


def _first_line(exception: object) -> str:
    # Only the type and first line: an error text can quote the records it choked on.
    if exception is None:
        return "-"
    text = str(exception).strip().splitlines()
    return f"{type(exception).__name__}: {text[0][:200] if text else ''}"


def default_args() -> dict[str, Any]:
    """Retries for transient faults (a busy JVM, a queue restarting), and the failure hook."""
    return {
        "owner": "ackfold",
        "retries": 2,
        "retry_delay": timedelta(seconds=30),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=5),
        "on_failure_callback": on_failure,
    }


def from_next_tick(schedule: str) -> Any:
    """`schedule` (a cron or preset, in UTC) whose first run is its next tick after the DAG
    appears. A DAG given this has no `start_date`: with one and `catchup=False`, Airflow
    would also run the latest past tick at once, so `make run` (or a deploy) would start
    maintenance and every app DAG while the demo is still running."""
    from ackfold.airflow.compat import cron_trigger_timetable

    # `run_immediately=False` would still run a tick less than 5 minutes (or a tenth of the
    # interval) past; a zero window means none.
    return cron_trigger_timetable()(schedule, timezone="UTC", run_immediately=timedelta(0))
