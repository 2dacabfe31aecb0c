"""What ackfold's DAG files share: default arguments, the failure hook, the `root_state`
asset, the manual replay's form and task bodies, and the alerts and metrics tasks. How a
task runs a Spark job is `ackfold.spark_tasks`.

DAG files stay declarations; everything they compute comes from here, so tests can call
it without a scheduler. Airflow is imported inside the functions that need it: the CLI
imports this module too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import Settings, load_settings
from ackfold.spark_tasks import with_kafka_connection

if TYPE_CHECKING:
    from airflow.sdk import Asset, CronTriggerTimetable, Param

log = logging.getLogger("ackfold.dags")

PROJECT_DIR = Path(__file__).resolve().parents[2]
ROOT_STATE_ASSET_NAME: Final = "ackfold_root_state"
# The sends a manual replay's return value lists (all of them are in the task log).
SHOWN_SENDS: Final = 50
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


def from_next_tick(schedule: str) -> CronTriggerTimetable:
    """`schedule` (a cron or preset, in UTC) whose first run is its next tick after the DAG
    appears. A DAG given this has no `start_date`: with one and `catchup=False`, Airflow
    would also run the latest past tick at once, so `make run` (or a deploy) would start
    maintenance and every app DAG while the demo is still running."""
    from airflow.sdk import CronTriggerTimetable

    # `run_immediately=False` would still run a tick less than 5 minutes (or a tenth of the
    # interval) past; a zero window means none.
    return CronTriggerTimetable(schedule, timezone="UTC", run_immediately=timedelta(0))


def root_state_asset(settings: Settings | None = None) -> Asset:
    """The `root_state` table as an Airflow asset: `ackfold_reconcile` updates it, and each
    update triggers `ackfold_replay`. Its URI is the table's location (`file://` for a
    local warehouse; Airflow keeps other schemes, such as `s3a://`, as they are)."""
    from airflow.sdk import Asset

    from ackfold.ledger.tables import ROOT_STATE, Ledger

    settings = settings or load_settings()
    path = Ledger(settings.table_root).path(ROOT_STATE)
    uri = path if "://" in path else Path(path).as_uri()
    return Asset(name=ROOT_STATE_ASSET_NAME, uri=uri, group="ackfold")


def manual_replay_params(settings: Settings | None = None) -> dict[str, Param]:
    """The form of `ackfold_manual_replay`: one Param per `ackfold.replay.params.CONF_KEYS`, with
    the defaults `parse_replay_conf` applies to a missing key."""
    from airflow.sdk import Param

    from ackfold.ledger.parse import EARLIEST, LATEST, MAX_LIMIT, MAX_RATE, MIN_RATE
    from ackfold.replay.params import MAX_ROOT_IDS
    from ackfold.replay.request import DEFAULT_STATUSES, REPLAYABLE

    settings = settings or load_settings()
    which, how = "Which roots", "How to send"
    return {
        "root_ids": Param(
            [],
            type="array",
            items={"type": "string", "pattern": r"^\s*([+-]?[0-9]+|(0[xX])?[0-9a-fA-F]{1,16})\s*$"},
            maxItems=MAX_ROOT_IDS,
            title="Root ids",
            description="One per line, as `ackfold roots` lists it (0x and 16 hex digits), "
            "or in decimal. Empty: every root the filters below select.",
            section=which,
        ),
        "app": Param(
            None,
            type=["null", "string"],
            enum=[None, *sorted(settings.apps)],
            title="App",
            description="Only roots of this app (empty: any app).",
            section=which,
        ),
        "statuses": Param(
            list(DEFAULT_STATUSES),
            type="array",
            items={"type": "string", "enum": list(REPLAYABLE)},
            minItems=1,
            uniqueItems=True,
            title="Statuses",
            description="Roots in these statuses. `dead_lettered` brings dead letters back.",
            section=which,
        ),
        "since": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="Status changed since",
            description=f"ISO-8601, e.g. 2026-11-22T10:00:00Z, from {EARLIEST.year} up to "
            f"{LATEST.year} (empty: no lower bound).",
            section=which,
        ),
        "until": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="Status changed before",
            description=f"ISO-8601, from {EARLIEST.year} up to {LATEST.year} (empty: no upper "
            "bound).",
            section=which,
        ),
        "limit": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            maximum=MAX_LIMIT,
            title="Limit",
            description=f"At most this many roots (1 to {MAX_LIMIT:,}), oldest status change "
            "first. Required to send when no root id, app or time range narrows the request.",
            section=which,
        ),
        "rate": Param(
            None,
            type=["null", "number"],
            minimum=MIN_RATE,
            maximum=MAX_RATE,
            title="Rate (messages/s)",
            description=f"From {MIN_RATE:g} to {MAX_RATE:,.0f}. Empty: the app's `replay_rate`.",
            section=how,
        ),
        "dry_run": Param(
            True,
            type="boolean",
            title="Dry run",
            description="Plan and log what would be sent, send nothing. Untick to send.",
            section=how,
        ),
    }


def requester(dag_run: Any) -> str:
    """`requested_by` of a manual replay: the Airflow user who triggered the run."""
    user = getattr(dag_run, "triggering_user_name", None)
    return f"airflow:{user}" if user else "airflow"


def validate_manual_conf(
    conf: dict[str, Any] | None, settings: Settings | None = None
) -> dict[str, Any]:
    """The `validate` task: the run's conf, checked and normalized (what the replay task
    runs). A bad conf fails the task at once, without retries: it will not get better."""
    from airflow.sdk.exceptions import AirflowFailException

    from ackfold.replay.params import ReplayParamsError, conf_from_request, parse_replay_conf

    settings = settings or load_settings()
    try:
        request = parse_replay_conf(conf or {}, apps=list(settings.apps))
    except ReplayParamsError as exc:
        raise AirflowFailException(str(exc)) from None
    return conf_from_request(request)


def run_manual_replay(
    conf: dict[str, Any], requested_by: str, settings: Settings | None = None
) -> dict[str, Any]:
    """The `replay` task: plan, log each send (root, status, target; never a payload),
    execute (`run_replay`: on the embedded engine in this process, or on Spark), and
    return the summary (with the first `SHOWN_SENDS` sends listed)."""
    from airflow.sdk.exceptions import AirflowFailException

    from ackfold.ledger.ids import format_id
    from ackfold.replay.params import parse_replay_conf
    from ackfold.replay.planner import Plan, UnknownRoots
    from ackfold.replay.replayer import unsent_error
    from ackfold.replay.run import run_replay
    from ackfold.spark import get_spark

    settings = with_kafka_connection(settings or load_settings())
    request = parse_replay_conf(conf, apps=list(settings.apps), requested_by=requested_by)
    sends: list[dict[str, Any]] = []

    def show(plan: Plan) -> None:
        verb = "would send" if request.dry_run else "sending"
        sends.extend(
            {
                "root_id": format_id(p.root_id),
                "app": p.app,
                "status": p.prior_status,
                "action": p.action,
                "attempt": p.attempt,
                "target": p.target,
                "state": p.state,
            }
            for p in plan.sends
        )
        log.info(
            "manual replay by %s: %s; %d selected", requested_by, request.describe(), plan.selected
        )
        for send in sends:
            log.info("%s %s", verb, json.dumps(send))
        for reason, count in sorted(plan.skipped.items()):
            log.info("skipping %d root(s): %s", count, reason)

    try:
        summary = run_replay(
            settings,
            request,
            spark=lambda: get_spark(settings, app_name="ackfold-manual-replay"),
            on_plan=show,
            holder=f"manual replay by {requested_by}",
        )
    except UnknownRoots as exc:
        raise AirflowFailException(str(exc)) from None
    result = summary.as_dict()
    result["sends"] = sends[:SHOWN_SENDS]
    result["sends_not_shown"] = max(0, len(sends) - SHOWN_SENDS)
    log.info("manual replay summary: %s", json.dumps(summary.as_dict(), default=str))
    if summary.not_sent:
        raise unsent_error(summary)
    return result


def run_automatic_replay(settings: Settings | None = None) -> dict[str, Any]:
    """The `replay` task of `ackfold_replay` on the embedded engine, in the task's own
    process (`spark_apps/replay.py --auto` runs the same on Spark): each app's policy.
    Fails, naming the error, if messages stayed unsent: the next run sends exactly those."""
    from ackfold.replay.run import automatic_replay

    return automatic_replay(with_kafka_connection(settings or load_settings()))


def reconcile_in_task() -> dict[str, Any]:
    """The `reconcile` task of `ackfold_reconcile` on the embedded engine: the run in the
    task's own process, its JSON summary logged and returned (XCom), its counters pushed
    over OTLP when metrics are on."""
    import json

    from ackfold.metrics import export_run
    from ackfold.reconcile.run import run_reconcile

    settings = load_settings()
    summary = run_reconcile(settings, holder="ackfold_reconcile")
    export_run(settings, "reconcile", summary)
    log.info("%s", json.dumps(summary, sort_keys=True))
    return summary


def quality_check(airflow_run_id: str, settings: Settings | None = None) -> dict[str, Any]:
    """The `check` task of `ackfold_quality` on the embedded engine: the quality run in the
    task's own process (no JVM, no spark-submit), as `spark_apps/quality.py` runs it on
    Spark. A violation is a result, not an error: the `verdict` task fails on it."""
    from ackfold.quality import run_quality
    from ackfold.quality.run import quality_run_id

    settings = settings or load_settings()
    report = run_quality(
        settings, run_id=quality_run_id(airflow_run_id), say=lambda text: log.info("%s", text)
    )
    log.info("%s", report.format())
    return {"run_id": report.run_id, "checks": len(report.results), "passed": report.passed}


def quality_verdict(airflow_run_id: str, settings: Settings | None = None) -> dict[str, Any]:
    """The `verdict` task: read the `quality_results` of the DAG run's quality run (no
    JVM) and fail, without retries, listing each violated expectation with its observed
    value."""
    from airflow.sdk.exceptions import AirflowFailException

    from ackfold.ledger.reader import LedgerReader
    from ackfold.quality import QualityReport
    from ackfold.quality.run import quality_run_id

    settings = settings or load_settings()
    quality_run = quality_run_id(airflow_run_id)
    rows = LedgerReader(settings.table_root).quality_run(quality_run)
    if not rows:
        raise AirflowFailException(f"quality run {quality_run} wrote no results: see `check`")
    report = QualityReport.from_rows(rows, settings.quality.docs_dir)
    log.info("%s", report.headline())
    if not report.passed:
        raise AirflowFailException(report.violation_message())
    return {"run_id": report.run_id, "checks": len(report.results), "passed": True}


def state_alerts(context: Mapping[str, Any], settings: Settings | None = None) -> dict[str, Any]:
    """The `alerts` task of `ackfold_reconcile`: the `root_state` rules of every app, one
    message per breach that opened or resolved (`ackfold.alerts`)."""
    from ackfold.alerts import check_state

    settings = settings or load_settings()
    return check_state(settings, context=context, airflow_run_id=str(context.get("run_id")))


def quality_alerts(context: Mapping[str, Any], settings: Settings | None = None) -> dict[str, Any]:
    """The `alerts` task of `ackfold_quality`: the quality rule over the DAG run's quality
    run, whatever its verdict (it runs after a failed one too)."""
    from ackfold.alerts import check_quality
    from ackfold.ledger.reader import LedgerReader
    from ackfold.quality.run import quality_run_id

    settings = settings or load_settings()
    run_id = str(context["run_id"])
    rows = LedgerReader(settings.table_root).quality_run(quality_run_id(run_id))
    return check_quality(settings, rows, context=context, airflow_run_id=run_id)


def ledger_metrics(context: Mapping[str, Any], settings: Settings | None = None) -> dict[str, Any]:
    """The `metrics` task of `ackfold_reconcile`: what `root_state` says after the run,
    over OTLP (`ackfold.metrics`); the time to detect of what this DAG run marked counts
    from the run's start."""
    from ackfold.metrics import export_ledger

    dag_run = context.get("dag_run")
    since = getattr(dag_run, "start_date", None)
    return export_ledger(settings or load_settings(), since=since)
