"""Alerts through Airflow's notifiers: each app's thresholds held against the ledger after
every reconcile and quality run, one message when a breach opens and one when it
resolves, on e-mail (the SMTP provider) and a Slack-compatible webhook.

- `rules`: the rules and their findings (`evaluate_state`, `evaluate_quality`);
- `log`: the `alert_log` table, which breaches are open per channel, and `transitions`;
- `message`: what a message says, and the Reliability UI's address for its links;
- `notifiers`: the channels (`SmtpNotifier`, `WebhookNotifier`) on Airflow connections;
- `run`: one evaluation and its deliveries (`check_state`, `check_quality`).

Example:
    >>> from ackfold.alerts import check_state
    >>> check_state(settings)  # doctest: +SKIP
    {'findings': 5, 'breached': ['orders:failed'], 'sent': {'email': 1, 'webhook': 1}}
"""

from ackfold.alerts.log import AlertLog, Transition, transitions
from ackfold.alerts.message import Message, compose, ui_url
from ackfold.alerts.notifiers import Channel, WebhookError, WebhookNotifier, channels
from ackfold.alerts.rules import Finding, evaluate_quality, evaluate_state
from ackfold.alerts.run import (
    AlertDeliveryError,
    check_quality,
    check_state,
    deliver,
    notify_failure,
)

__all__ = [
    "AlertDeliveryError",
    "AlertLog",
    "Channel",
    "Finding",
    "Message",
    "Transition",
    "WebhookError",
    "WebhookNotifier",
    "channels",
    "check_quality",
    "check_state",
    "compose",
    "deliver",
    "evaluate_quality",
    "evaluate_state",
    "notify_failure",
    "transitions",
    "ui_url",
]
