"""One evaluation of the alert rules and the messages it sends: what the `alerts` tasks of
`ackfold_reconcile` and `ackfold_quality` run.

Per channel: the breaches open there (`AlertLog`), the transitions the findings make,
one message per app with any, sent, then recorded. A channel that fails does not stop
the others; the run then raises `AlertDeliveryError`, naming each, and the next run
(Airflow's retry, or the next evaluation) sends what did not go out.
"""

from __future__ import annotations

import html
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ackfold.alerts.log import AlertLog, Transition, transitions
from ackfold.alerts.message import Message, compose, ui_url
from ackfold.alerts.notifiers import Channel, channels
from ackfold.alerts.rules import (
    LEDGER_APP,
    QUALITY_RULES,
    STATE_RULES,
    Finding,
    evaluate_quality,
    evaluate_state,
)
from ackfold.config import Settings
from ackfold.errors import AckfoldError
from ackfold.ledger.reading.sql import SqlReader, first_line
from ackfold.ledger.schema.ids import format_id

log = logging.getLogger("ackfold.alerts")


class AlertDeliveryError(AckfoldError, RuntimeError):
    """A channel could not deliver an alert; it is sent again on the next run."""


def check_state(
    settings: Settings,
    *,
    now: datetime | None = None,
    context: Mapping[str, Any] | None = None,
    airflow_run_id: str | None = None,
) -> dict[str, Any]:
    """Evaluate the `root_state` rules at `now` and deliver what opened or resolved."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    findings = evaluate_state(SqlReader(settings.table_root), settings, now)
    return deliver(settings, findings, STATE_RULES, now, context or {}, airflow_run_id)


def check_quality(
    settings: Settings,
    rows: Sequence[Mapping[str, Any]],
    *,
    now: datetime | None = None,
    context: Mapping[str, Any] | None = None,
    airflow_run_id: str | None = None,
) -> dict[str, Any]:
    """Evaluate the quality rule over one quality run's `quality_results` rows and deliver
    what opened or resolved. No rows (the checks wrote none): nothing changes."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    if not rows:
        log.warning("alerts: the quality run wrote no results; its alerts stay as they are")
        return {"findings": 0, "breached": [], "sent": {}}
    findings = evaluate_quality(rows, settings)
    return deliver(settings, findings, QUALITY_RULES, now, context or {}, airflow_run_id)


def deliver(
    settings: Settings,
    findings: Sequence[Finding],
    rules: Sequence[str],
    now: datetime,
    context: Mapping[str, Any],
    airflow_run_id: str | None = None,
    via: Sequence[Channel] | None = None,
) -> dict[str, Any]:
    """Send, on each channel, one message per app whose breaches of `rules` opened or
    resolved, and record each sent transition. Returns what was found and sent."""
    breached = [f for f in findings if f.breached]
    for f in breached:
        log.warning(
            "alert breach: app=%s rule=%s value=%s limit=%s roots=%s",
            f.app, f.rule, f.value, f.threshold, ",".join(map(format_id, f.root_ids)) or "-",
        )  # fmt: skip
    summary: dict[str, Any] = {
        "findings": len(findings),
        "breached": [f"{f.app}:{f.rule}" for f in breached],
        "sent": {},
    }
    via = channels(settings) if via is None else via
    if not via:
        log.info("alerts: no channel configured (alerts.email_to, alerts.webhook_conn_id)")
        return summary
    book = AlertLog(settings.table_root)
    base = ui_url(settings)
    failures = []
    for channel in via:
        changes = transitions(findings, book.open_breaches(channel.name), rules, now)
        by_app: dict[str, list[Transition]] = defaultdict(list)
        for change in changes:
            by_app[change.finding.app].append(change)
        sent = 0
        for app, mine in sorted(by_app.items()):
            message = compose(app, mine, base, now)
            try:
                channel.send(message, context)
            except Exception as exc:  # any notifier error: the other channels still go out
                failures.append(f"{channel.name} for app {app}: {first_line(exc)}")
                log.error("alert not sent: channel=%s app=%s: %s", channel.name, app, exc)
                continue
            book.record(channel.name, mine, now, airflow_run_id)
            sent += 1
            log.info("alert sent: channel=%s %s", channel.name, message.subject)
        summary["sent"][channel.name] = sent
    if failures:
        raise AlertDeliveryError(
            "alerts not delivered (sent again on the next run): " + "; ".join(failures)
        )
    return summary


def notify_failure(context: Mapping[str, Any], settings: Settings) -> None:
    """Tell the alert channels that an ackfold task failed for good: DAG, task, run and
    the error's type and first line. No state: each failure is one message."""
    ti = context.get("task_instance") or context.get("ti")
    dag_id, task_id = getattr(ti, "dag_id", "?"), getattr(ti, "task_id", "?")
    exception = context.get("exception")
    error = f"{type(exception).__name__}: {first_line(exception)[:200]}" if exception else "-"
    text = f"ackfold task failed: {dag_id}.{task_id} (run {context.get('run_id', '?')}): {error}"
    subject = f"[ackfold] task failed: {dag_id}.{task_id}"
    message = Message(LEDGER_APP, subject, text, f"<p>{html.escape(text)}</p>")
    for channel in channels(settings):
        try:
            channel.send(message, context)
        except Exception as exc:  # the failure is logged already; a channel down adds no harm
            log.error("failure alert not sent: channel=%s: %s", channel.name, first_line(exc))
