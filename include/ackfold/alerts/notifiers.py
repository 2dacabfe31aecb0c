"""How alerts reach people: Airflow notifiers on Airflow connections.

- e-mail: the SMTP provider's `SmtpNotifier` on `alerts.smtp_conn_id` (`smtp_default`),
  to `alerts.email_to`;
- a webhook: `WebhookNotifier`, ours, which posts Slack-compatible JSON (`{"text": ...}`)
  to the URL of the connection `alerts.webhook_conn_id`. Slack's incoming webhooks take
  it, and so do Mattermost, Rocket.Chat and the many receivers that mimic them; it needs
  no Slack SDK, and the URL, a secret, stays in the connection.

Each is called through `notify()`, not `__call__`: the latter renders the message as a
Jinja template, and a message quotes app names and check names that are not ours.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from airflow.sdk import BaseNotifier

from ackfold.alerts.message import Message
from ackfold.config import Settings
from ackfold.errors import AckfoldError

EMAIL: Final = "email"
WEBHOOK: Final = "webhook"


class WebhookError(AckfoldError, RuntimeError):
    """The webhook refused a message or could not be reached (the URL is never quoted)."""


def webhook_url(conn_id: str) -> str:
    """The webhook URL of Airflow connection `conn_id`: its password, if that is a URL
    (Airflow masks it), else its host (a whole URL, or a host name with the connection's
    schema, port and `endpoint` extra)."""
    from importlib import import_module

    # `airflow.sdk.BaseHook` since Airflow 3.1; 3.0 keeps it in `airflow.hooks.base`
    # (ackfold.airflow.compat has the others, a layer above this one).
    hook = getattr(import_module("airflow.sdk"), "BaseHook", None)
    hook = hook or import_module("airflow.hooks.base").BaseHook
    conn = hook.get_connection(conn_id)
    for candidate in (conn.password, conn.host):
        if candidate and candidate.strip().lower().startswith(("http://", "https://")):
            return str(candidate).strip()
    if not conn.host:
        raise WebhookError(
            f"connection {conn_id!r} has no webhook URL: put it in the password (or the host)"
        )
    scheme = conn.schema if conn.schema in ("http", "https") else "https"
    port = f":{conn.port}" if conn.port else ""
    endpoint = str(conn.extra_dejson.get("endpoint") or "").lstrip("/")
    return f"{scheme}://{conn.host}{port}/{endpoint}"


def slack_safe(text: str) -> str:
    """`text` with `<` and `>` escaped, as Slack asks: an app name such as `<!channel>`
    must not page a whole channel, nor `<url|label>` disguise a link.

    Example:
        >>> slack_safe("app <!channel> ok")
        'app &lt;!channel&gt; ok'
    """
    return text.replace("<", "&lt;").replace(">", "&gt;")


class WebhookNotifier(BaseNotifier):
    """Posts `{"text": text}` to the webhook of connection `webhook_conn_id`.

    Example:
        >>> notifier = WebhookNotifier(webhook_conn_id="ackfold_alerts", text="hello")
        >>> notifier.notify({})  # doctest: +SKIP
    """

    template_fields = ("text",)

    def __init__(self, *, webhook_conn_id: str, text: str, timeout: float = 10.0) -> None:
        super().__init__()
        self.webhook_conn_id = webhook_conn_id
        self.text = text
        self.timeout = timeout

    def notify(self, context: Any) -> None:
        url = webhook_url(self.webhook_conn_id)
        body = json.dumps({"text": slack_safe(self.text)}).encode()
        request = urllib.request.Request(  # noqa: S310 (webhook_url returns http(s) only)
            url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        where = f"webhook of connection {self.webhook_conn_id!r}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310
                answer.read()
        except urllib.error.HTTPError as exc:
            raise WebhookError(f"the {where} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise WebhookError(f"the {where} is unreachable: {type(reason).__name__}") from None


@dataclass(frozen=True)
class Channel:
    """A way to people: `send(message, context)` raises if the message did not go out."""

    name: str
    send: Callable[[Message, Mapping[str, Any]], None]


def channels(settings: Settings) -> list[Channel]:
    """The channels the settings configure: e-mail if `alerts.email_to` names anyone, the
    webhook if `alerts.webhook_conn_id` is set."""
    alerts = settings.alerts
    out = []
    if alerts.email_to:

        def email(message: Message, context: Mapping[str, Any]) -> None:
            from airflow.providers.smtp.notifications.smtp import SmtpNotifier

            SmtpNotifier(
                to=list(alerts.email_to),
                from_email=alerts.email_from,
                subject=message.subject,
                html_content=message.html,
                smtp_conn_id=alerts.smtp_conn_id,
            ).notify(dict(context))  # type: ignore[arg-type]

        out.append(Channel(EMAIL, email))
    if alerts.webhook_conn_id:
        conn_id = alerts.webhook_conn_id

        def webhook(message: Message, context: Mapping[str, Any]) -> None:
            WebhookNotifier(
                webhook_conn_id=conn_id,
                text=message.text,
                timeout=alerts.webhook_timeout.total_seconds(),
            ).notify(context)

        out.append(Channel(WEBHOOK, webhook))
    return out
