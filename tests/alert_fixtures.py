"""Real receivers for the alerts' and the metrics' tests, on loopback: an SMTP server
(aiosmtpd), an HTTP receiver (stdlib `http.server`) that serves as a webhook and as an
OTLP/HTTP collector (`otlp_points` decodes what it got with opentelemetry-proto); and a
small `root_state` written without a JVM.

The Airflow connections the notifiers use come from `AIRFLOW_CONN_*` variables, as in
any deployment that keeps them in the environment."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ROOT_STATE
from ackfold_dev.ports import free_port
from tests.ledger_fixtures import write_rows

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
SECRET_PAYLOAD = '{"card": "4111-1111-1111-1111"}'


def ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


def state(
    root_id: int,
    app: str,
    root_status: str,
    first: datetime,
    changed: datetime,
    *,
    last: datetime | None = None,
    fail_at: datetime | None = None,
    attempt: int = 1,
    origin: int | None = None,
    reconciled: datetime | None = None,
) -> dict[str, Any]:
    """A `root_state` row as a reconcile (or a replay, for `reconciled`) leaves it."""
    assert root_status in status.ALL
    return {
        "root_id": root_id,
        "app": app,
        "status": root_status,
        "xor_acc": 0,
        "event_count": 2,
        "first_event_at": first,
        "last_event_at": last or first,
        "status_changed_at": changed,
        "attempt": attempt,
        "origin_root_id": origin or root_id,
        "last_stage": "sink",
        # A reason that quotes the record: it must never reach a message.
        "fail_reason": f"bad record {SECRET_PAYLOAD}" if fail_at else None,
        "fail_stage": "sink" if fail_at else None,
        "fail_at": fail_at,
        "init_seen": True,
        "seen_event_hashes": [],
        "reconciled_at": reconciled or changed,
        "first_event_date": first.date(),
    }


def write_state(warehouse: str | Path, rows: list[dict[str, Any]]) -> None:
    write_rows(warehouse, ROOT_STATE, rows)


@dataclass
class SmtpServer:
    """A real SMTP server on loopback; `messages` are the e-mails it received."""

    port: int
    messages: list[Message] = field(default_factory=list)

    def connection(self) -> str:
        return json.dumps(
            {
                "conn_type": "smtp",
                "host": "127.0.0.1",
                "port": self.port,
                "extra": {
                    "from_email": "ackfold@example.test",
                    "disable_ssl": True,
                    "disable_tls": True,
                    "timeout": 10,
                    "retry_limit": 0,
                },
            }
        )


@contextmanager
def smtp_server() -> Iterator[SmtpServer]:
    from aiosmtpd.controller import Controller

    server = SmtpServer(free_port())

    class Handler:
        async def handle_DATA(self, smtp: Any, session: Any, envelope: Any) -> str:
            server.messages.append(message_from_bytes(envelope.content))
            return "250 OK"

    controller = Controller(Handler(), hostname="127.0.0.1", port=server.port)
    controller.start()
    try:
        yield server
    finally:
        controller.stop()


def html_of(mail: Message) -> str:
    """The HTML part of an e-mail the SmtpNotifier sent."""
    for part in mail.walk():
        if part.get_content_type() == "text/html":
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            return payload.decode()
    raise AssertionError("no text/html part")


class Receiver:
    """A real HTTP server on 127.0.0.1 that keeps each POST's path, headers and body and
    answers `status` (200 unless a test sets it)."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.status = 200
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                receiver.posts.append(
                    {
                        "path": self.path,
                        "content_type": self.headers.get("Content-Type"),
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": self.rfile.read(length),
                    }
                )
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def texts(self) -> list[str]:
        """The `text` of each Slack-compatible JSON message received."""
        return [json.loads(post["body"])["text"] for post in self.posts]


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    with smtp_server() as server:
        yield server


@pytest.fixture
def webhook() -> Iterator[Receiver]:
    with Receiver() as receiver:
        yield receiver


@pytest.fixture
def connections(
    monkeypatch: pytest.MonkeyPatch, smtp: SmtpServer, webhook: Receiver
) -> dict[str, str]:
    """`smtp_default` on the test's SMTP server, `ackfold_alerts` on its webhook (the URL
    in the password, as a Slack webhook's secret URL would be)."""
    hook = json.dumps({"conn_type": "http", "password": f"{webhook.url}/hooks/T1/B2/secret"})
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", smtp.connection())
    monkeypatch.setenv("AIRFLOW_CONN_ACKFOLD_ALERTS", hook)
    return {"smtp": "smtp_default", "webhook": "ackfold_alerts"}


def otlp_points(receiver: Receiver) -> dict[str, list[dict[str, Any]]]:
    """Every data point the receiver got over OTLP/HTTP, decoded: metric name -> points,
    each with its attributes, its resource's attributes and its value (a histogram's
    `count`, `sum` and `buckets`)."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    def attrs(items: Any) -> dict[str, Any]:
        out = {}
        for item in items:
            kind = item.value.WhichOneof("value")
            out[item.key] = getattr(item.value, kind)
        return out

    points: dict[str, list[dict[str, Any]]] = {}
    for post in receiver.posts:
        assert post["path"] == "/v1/metrics", post["path"]
        assert post["content_type"] == "application/x-protobuf"
        request = ExportMetricsServiceRequest.FromString(post["body"])
        for resource in request.resource_metrics:
            where = attrs(resource.resource.attributes)
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    for point in getattr(metric, kind).data_points:
                        entry = {"attributes": attrs(point.attributes), "resource": where}
                        if kind == "histogram":
                            entry |= {"count": point.count, "sum": point.sum,
                                      "buckets": list(point.bucket_counts),
                                      "bounds": list(point.explicit_bounds)}  # fmt: skip
                        else:
                            value = point.WhichOneof("value")
                            entry["value"] = getattr(point, value)
                        entry["kind"] = kind
                        points.setdefault(metric.name, []).append(entry)
    return points
