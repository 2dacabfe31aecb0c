"""The bodies of ackfold's Airflow tasks: each calls the run of `ackfold.reconcile`,
`ackfold.replay`, `ackfold.maintenance`, `ackfold.quality`, `ackfold.alerts` or
`ackfold.metrics`, logs it and returns its summary (XCom). A run that will not get
better by retrying (a bad conf, a violated expectation) fails the task without retries.
An `AckfoldError` ends the task as the CLI's one line (`ackfold: <what is wrong and the
fix>`), the last line of the task's log, not a traceback through ackfold's internals
(`one_line_errors`; its traceback is logged at DEBUG). Tests call these without a scheduler."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, ParamSpec, TypeVar

from ackfold.airflow.compat import airflow_exception, fail_exception
from ackfold.airflow.connections import with_kafka_connection
from ackfold.config import Settings, load_settings
from ackfold.errors import AckfoldError

log = logging.getLogger("ackfold.airflow")

P = ParamSpec("P")
R = TypeVar("R")

# The sends a manual replay's return value lists (all of them are in the task log).
SHOWN_SENDS: Final = 50


def one_line_errors(body: Callable[P, R]) -> Callable[P, R]:
    """`body` (a task's callable), with an `AckfoldError` turned into an
    `AirflowException` whose message is the CLI's line for it: the task still fails (and
    is retried, if it has retries), and its log ends with that line after a traceback of
    this one frame. The original traceback is logged at DEBUG."""

    @functools.wraps(body)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return body(*args, **kwargs)
        except AckfoldError as exc:
            log.debug("%s raised", body.__name__, exc_info=exc)
            raise airflow_exception()(f"ackfold: {exc}") from None

    return run


@one_line_errors
def run_manual_replay(
    conf: dict[str, Any], requested_by: str, settings: Settings | None = None
) -> dict[str, Any]:
    """The `replay` task: plan, log each send (root, status, target; never a payload),
    execute (`run_replay`: on the embedded engine in this process, or on Spark), and
    return the summary (with the first `SHOWN_SENDS` sends listed)."""
    from ackfold.ledger.schema.ids import format_id
    from ackfold.replay.params import parse_replay_conf
    from ackfold.replay.planner import Plan, UnknownRoots
    from ackfold.runs.replay import run_replay
    from ackfold.runs.replayer import unsent_error
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
        raise fail_exception()(str(exc)) from None
    result = summary.as_dict()
    result["sends"] = sends[:SHOWN_SENDS]
    result["sends_not_shown"] = max(0, len(sends) - SHOWN_SENDS)
    log.info("manual replay summary: %s", json.dumps(summary.as_dict(), default=str))
    if summary.not_sent:
        raise unsent_error(summary)
    return result


@one_line_errors
def run_manual_retract(
    conf: dict[str, Any], requested_by: str, settings: Settings | None = None
) -> dict[str, Any]:
    """The `retract` task: find the selected dead letters' rows in their apps' declared
    outputs, log what would go (root, output, rows; never a row's values), and, unless a
    dry run, delete them (`run_retract`: written ahead to `retract_log`, one commit per
    output table, under the ledger's turn); return the summary. A root the retract may
    not take (not dead-lettered, completed by a later attempt, being replayed) or that
    the ledger does not know fails the task without retries: it will not get better."""
    from ackfold.effects.errors import RetractRefused, UnknownRoots
    from ackfold.effects.params import parse_retract_conf
    from ackfold.effects.plans import RetractPlan
    from ackfold.effects.retract import run_retract
    from ackfold.ledger.schema.ids import format_id

    settings = settings or load_settings()
    request = parse_retract_conf(conf, apps=list(settings.apps), requested_by=requested_by)
    verb = "would delete" if request.dry_run else "deleting"

    def show(plan: RetractPlan) -> None:
        log.info("manual retract by %s: %s; %d selected", requested_by, request.describe(),
                 plan.selected)  # fmt: skip
        for root in plan.roots:
            for found in root.outputs:
                if found.problem:
                    log.warning("%s %s: %s", format_id(root.root.root_id),
                                found.output.output, found.problem)  # fmt: skip
                elif found.rows:
                    log.info("%s %d row(s) of root %s (app %s) from %s", verb, found.rows,
                             format_id(root.root.root_id), root.root.app,
                             found.output.output)  # fmt: skip
        for reason, count in sorted(plan.skipped.items()):
            log.info("skipping %d root(s): %s", count, reason)

    try:
        summary = run_retract(
            settings, request, on_plan=show, holder=f"manual retract by {requested_by}", sample=0
        )
    except UnknownRoots as exc:
        raise fail_exception()(str(exc)) from None
    except RetractRefused as exc:
        # One line: the failure hook and the alerts show only the first.
        refused = "; ".join(f"{format_id(r)}: {why}" for r, why in exc.refused.items())
        raise fail_exception()(f"retract refused, nothing deleted: {refused}") from None
    result = summary.as_dict()
    log.info("manual retract summary: %s", json.dumps(
        {k: v for k, v in result.items() if k != "roots"}, default=str))  # fmt: skip
    if summary.failed:
        failed = "; ".join(f"{output}: {why}" for output, why in sorted(summary.failed.items()))
        raise airflow_exception()(
            f"ackfold: the retract failed on {failed} (retract_log, retract "
            f"{summary.retract_id}, says what was planned)"
        )
    return result


@one_line_errors
def run_automatic_replay(settings: Settings | None = None) -> dict[str, Any]:
    """The `replay` task of `ackfold_replay` on the embedded engine, in the task's own
    process (`ackfold/jobs/replay.py --auto` runs the same on Spark): each app's policy.
    Fails, naming the error, if messages stayed unsent: the next run sends exactly those."""
    from ackfold.runs.replay import automatic_replay

    return automatic_replay(with_kafka_connection(settings or load_settings()))


@one_line_errors
def reconcile_in_task() -> dict[str, Any]:
    """The `reconcile` task of `ackfold_reconcile` on the embedded engine: the run in the
    task's own process, its JSON summary logged and returned (XCom), its counters pushed
    over OTLP when metrics are on (by `run_reconcile`)."""
    from ackfold.runs.reconcile import run_reconcile

    summary = run_reconcile(load_settings(), holder="ackfold_reconcile")
    log.info("%s", json.dumps(summary, sort_keys=True))
    return summary


@one_line_errors
def maintenance_in_task() -> dict[str, Any]:
    """The `maintain` task of `ackfold_maintenance` on the embedded engine: the run
    (`run_maintenance`: retention, compaction, VACUUM and log cleanup in delta-rs) in the
    task's own process (the packaged `maintenance.py` runs it on Spark); each step and
    its JSON summary logged, the summary returned (XCom), its metrics pushed over OTLP
    when metrics are on (by `run_maintenance`)."""
    from ackfold.maintenance import run_maintenance

    summary = run_maintenance(
        load_settings(), holder="ackfold_maintenance", progress=lambda text: log.info("%s", text)
    )
    log.info("%s", json.dumps(summary, sort_keys=True, default=str))
    return summary


@one_line_errors
def smoke_in_task() -> dict[str, Any]:
    """The `delta_round_trip` task of `ackfold_smoke` on the embedded engine: a Delta
    round trip in delta-rs in the warehouse (the packaged `smoke.py` makes it on Spark).
    Fails unless it read exactly what it wrote."""
    from ackfold.embedded.smoke import check, run_smoke
    from ackfold.ledger.commits.writer import LedgerWriter

    writer = LedgerWriter(load_settings().table_root)
    report = run_smoke(writer.uri("smoke"), writer.storage_options)
    log.info("%s", json.dumps(report, sort_keys=True))
    if not check(report):
        raise fail_exception()(f"the Delta round trip read back {report['words']}")
    return report


@one_line_errors
def quality_in_task(run_id: str) -> dict[str, Any]:
    """The `check` task of `ackfold_quality` on an engine that runs in the task's process:
    `quality_check` of the DAG run (`run_id`, which Airflow passes from the context)."""
    return quality_check(run_id)


def quality_check(airflow_run_id: str, settings: Settings | None = None) -> dict[str, Any]:
    """The `check` task of `ackfold_quality` on the embedded engine: the quality run in the
    task's own process (no JVM, no spark-submit), as `ackfold/jobs/quality.py` runs it on
    Spark. A violation is a result, not an error: the `verdict` task fails on it."""
    from ackfold.runs import run_quality
    from ackfold.runs.quality import quality_run_id

    settings = settings or load_settings()
    report = run_quality(
        settings, run_id=quality_run_id(airflow_run_id), say=lambda text: log.info("%s", text)
    )
    log.info("%s", report.format())
    return {"run_id": report.run_id, "checks": len(report.results), "passed": report.passed}


@one_line_errors
def quality_verdict(airflow_run_id: str, settings: Settings | None = None) -> dict[str, Any]:
    """The `verdict` task: read the `quality_results` of the DAG run's quality run (no
    JVM) and fail, without retries, listing each violated expectation with its observed
    value."""
    from ackfold.ledger.reading.reader import LedgerReader
    from ackfold.quality import QualityReport
    from ackfold.runs.quality import quality_run_id

    settings = settings or load_settings()
    quality_run = quality_run_id(airflow_run_id)
    rows = LedgerReader(settings.table_root).quality_run(quality_run)
    if not rows:
        raise fail_exception()(f"quality run {quality_run} wrote no results: see `check`")
    report = QualityReport.from_rows(rows, settings.quality.docs_dir)
    log.info("%s", report.headline())
    if not report.passed:
        raise fail_exception()(report.violation_message())
    return {"run_id": report.run_id, "checks": len(report.results), "passed": True}


@one_line_errors
def state_alerts(context: Mapping[str, Any], settings: Settings | None = None) -> dict[str, Any]:
    """The `alerts` task of `ackfold_reconcile`: the `root_state` rules of every app, one
    message per breach that opened or resolved (`ackfold.alerts`)."""
    from ackfold.alerts import check_state

    settings = settings or load_settings()
    return check_state(settings, context=context, airflow_run_id=str(context.get("run_id")))


@one_line_errors
def quality_alerts(context: Mapping[str, Any], settings: Settings | None = None) -> dict[str, Any]:
    """The `alerts` task of `ackfold_quality`: the quality rule over the DAG run's quality
    run, whatever its verdict (it runs after a failed one too)."""
    from ackfold.alerts import check_quality
    from ackfold.ledger.reading.reader import LedgerReader
    from ackfold.runs.quality import quality_run_id

    settings = settings or load_settings()
    run_id = str(context["run_id"])
    rows = LedgerReader(settings.table_root).quality_run(quality_run_id(run_id))
    return check_quality(settings, rows, context=context, airflow_run_id=run_id)


@one_line_errors
def ledger_metrics(context: Mapping[str, Any], settings: Settings | None = None) -> dict[str, Any]:
    """The `metrics` task of `ackfold_reconcile`: what `root_state` says after the run,
    over OTLP (`ackfold.metrics`); the time to detect of what this DAG run marked counts
    from the run's start."""
    from ackfold.metrics import export_ledger

    dag_run = context.get("dag_run")
    since = getattr(dag_run, "start_date", None)
    return export_ledger(settings or load_settings(), since=since)
