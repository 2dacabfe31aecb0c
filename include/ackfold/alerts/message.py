"""What an alert says: one message per app and evaluation, naming the breaches that opened
and resolved, their values and limits, the worst roots (ids only, never a payload) and
links to them in the Reliability UI. Plain text for the webhook, HTML for e-mail."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ackfold.alerts.log import OPENED, Transition
from ackfold.alerts.rules import LEDGER_APP, span
from ackfold.ledger.schema.ids import format_id
from ackfold.ledger.schema.values import iso

if TYPE_CHECKING:
    from datetime import datetime

    from ackfold.config import Settings


@dataclass(frozen=True)
class Message:
    """One alert: `subject` (one line), `text` (Slack-compatible plain text), `html`."""

    app: str
    subject: str
    text: str
    html: str


def ui_url(settings: Settings) -> str:
    """Where the Reliability UI is: `alerts.ui_url`, else Airflow's `[api] base_url` with
    the plugin's `/ackfold`, else the embedded Airflow on localhost."""
    if settings.alerts.ui_url:
        return settings.alerts.ui_url
    try:
        from airflow.configuration import conf

        base = conf.get("api", "base_url", fallback=None)
    except ImportError:  # the CLI's environment need not have Airflow
        base = None
    base = str(base).rstrip("/") if base else f"http://localhost:{settings.airflow.port}"
    return f"{base}/ackfold"


def compose(app: str, changes: Sequence[Transition], base_url: str, now: datetime) -> Message:
    """The message about `app`'s `changes` (all of one evaluation), links under `base_url`.

    Example:
        >>> from datetime import datetime, timezone
        >>> from ackfold.alerts.rules import Finding
        >>> t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
        >>> hit = Finding("orders", "failed", True, "3", "at most 0", "3 root(s) failed",
        ...               (7, 9), "/roots?app=orders")
        >>> m = compose("orders", [Transition(hit, "opened", t0)], "http://ui/ackfold", t0)
        >>> m.subject
        '[ackfold] orders: failed opened'
        >>> print(m.text.splitlines()[2])
          worst roots: 0x0000000000000007, 0x0000000000000009
    """
    who = "the ledger" if app == LEDGER_APP else app
    opened = [c.finding.rule for c in changes if c.event == OPENED]
    resolved = [c.finding.rule for c in changes if c.event != OPENED]
    parts = [f"{', '.join(opened)} opened"] if opened else []
    parts += [f"{', '.join(resolved)} resolved"] if resolved else []
    subject = f"[ackfold] {who}: {'; '.join(parts)}"
    lines, items = [], []
    for change in changes:
        finding = change.finding
        if change.event == OPENED:
            head = f"OPENED {finding.rule}: {finding.headline}"
        else:
            lasted = span((now - change.opened_at).total_seconds())
            head = f"RESOLVED {finding.rule}: {finding.headline} (open for {lasted})"
        link = f"{base_url}{finding.link}" if finding.link else None
        lines.append(head)
        item = f"<li><strong>{html.escape(head.split(':', 1)[0])}</strong>:"
        item += html.escape(head.split(":", 1)[1])
        if finding.root_ids:
            ids = ", ".join(format_id(root_id) for root_id in finding.root_ids)
            lines.append(f"  worst roots: {ids}")
            item += f"<br>worst roots: <code>{html.escape(ids)}</code>"
        if link:
            lines.append(f"  {link}")
            item += f'<br><a href="{html.escape(link)}">{html.escape(link)}</a>'
        items.append(item + "</li>")
    intro = f"ackfold alerts for {who} at {iso(now)}"
    text = "\n".join([intro, *lines])
    body = (
        f"<p>{html.escape(intro)}</p><ul>{''.join(items)}</ul>"
        f'<p><a href="{html.escape(base_url)}/overview">Reliability UI</a></p>'
    )
    return Message(app, subject, text, body)
