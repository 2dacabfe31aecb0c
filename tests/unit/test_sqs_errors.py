"""What a user reads when the SQS endpoint answers in words that are not SQS's: one line,
naming the endpoint, however long the reply (a web server or another emulator on the
endpoint's port answers with a page)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ackfold.config import load_settings
from ackfold.sources.base import Outbound, SourceError
from ackfold.sources.sqs import SqsQueue

pytestmark = pytest.mark.usefixtures("clean_env")

PAGE = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error>\n  <Code>AccessDenied</Code>\n'
    + b"  <Message>"
    + b"Access Denied. " * 40
    + b"</Message>\n</Error>\n"
)


class NotSqs(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(403)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotSqs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _queue(endpoint: str) -> SqsQueue:
    settings = load_settings(sqs={"endpoint_url": endpoint, "max_retries": 1})
    return SqsQueue(settings, "numbers")


def test_a_page_for_an_answer_is_one_short_line_naming_the_endpoint(endpoint: str) -> None:
    with pytest.raises(SourceError) as caught:
        _queue(endpoint).url("numbers")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"SQS GetQueueUrl failed at {endpoint}: 403: <?xml"), message
    assert message.endswith("…")
    assert len(message) < 300


def test_a_replay_that_meets_such_a_page_keeps_each_message_with_that_line(
    endpoint: str,
) -> None:
    outbound = [Outbound(root_id=i, origin_root_id=i, attempt=2, body=f"m{i}") for i in range(3)]
    sent = _queue(endpoint).republish(outbound)
    assert [s.root_id for s in sent] == [0, 1, 2]
    assert not any(s.ok for s in sent)
    assert {s.error for s in sent} == {sent[0].error}
    error = sent[0].error or ""
    assert "\n" not in error
    assert "403" in error
