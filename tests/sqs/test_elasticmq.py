import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import botocore
import pytest
from botocore.config import Config

from ackfold.config import load_settings
from ackfold_dev.elasticmq import ElasticMQ, ElasticMQError
from ackfold_dev.stack import MARKER
from tests.sqs.conftest import Queue, free_port, settings_for


def _attributes(sqs: Any, url: str) -> dict[str, str]:
    attributes: dict[str, str] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
        "Attributes"
    ]
    return attributes


def test_demo_queues_and_their_dead_letter_queues_exist(sqs_server: ElasticMQ, sqs: Any) -> None:
    # The run shares this server: other tests' queues may be there too.
    assert {"wordcount-sentences", "wordcount-sentences-dlq"} <= set(sqs_server.queue_names())
    url = sqs.get_queue_url(QueueName="wordcount-sentences")["QueueUrl"]
    # Queue URLs carry the port given at start, not the file's 9324.
    assert url.startswith(sqs_server.endpoint_url + "/")
    attributes = _attributes(sqs, url)
    assert attributes["VisibilityTimeout"] == "60"
    assert json.loads(attributes["RedrivePolicy"]) == {
        "deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:wordcount-sentences-dlq",
        "maxReceiveCount": 10,
    }
    dlq = sqs.get_queue_url(QueueName="wordcount-sentences-dlq")["QueueUrl"]
    assert _attributes(sqs, dlq)["QueueArn"].endswith(":wordcount-sentences-dlq")


def test_send_receive_delete_round_trip(sqs: Any, make_queue: Callable[..., Queue]) -> None:
    queue = make_queue()
    sent = sqs.send_message(
        QueueUrl=queue.url,
        MessageBody="the quick brown fox",
        MessageAttributes={
            "app": {"DataType": "String", "StringValue": "wordcount"},
            "attempt": {"DataType": "Number", "StringValue": "2"},
        },
    )
    received = sqs.receive_message(
        QueueUrl=queue.url, MessageAttributeNames=["All"], WaitTimeSeconds=1
    )["Messages"]
    assert len(received) == 1
    message = received[0]
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == "the quick brown fox"
    assert message["MessageAttributes"] == {
        "app": {"DataType": "String", "StringValue": "wordcount"},
        "attempt": {"DataType": "Number", "StringValue": "2"},
    }
    sqs.delete_message(QueueUrl=queue.url, ReceiptHandle=message["ReceiptHandle"])
    attributes = _attributes(sqs, queue.url)
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_fifo_queue_with_dead_letter_queue(sqs: Any, make_queue: Callable[..., Queue]) -> None:
    queue = make_queue(fifo=True, dlq=True, max_receive_count=1)
    assert queue.name.endswith(".fifo")
    assert queue.dlq_url is not None
    sqs.send_message(
        QueueUrl=queue.url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="1"
    )
    first = sqs.receive_message(QueueUrl=queue.url, VisibilityTimeout=0)["Messages"]
    assert [m["Body"] for m in first] == ["x"]
    # Past maxReceiveCount the server moves the message to the dead-letter queue.
    assert sqs.receive_message(QueueUrl=queue.url).get("Messages", []) == []
    moved = sqs.receive_message(QueueUrl=queue.dlq_url, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in moved] == ["x"]


def test_unsigned_requests_are_accepted(sqs_server: ElasticMQ) -> None:
    unsigned = boto3.client(
        "sqs",
        endpoint_url=sqs_server.endpoint_url,
        region_name="us-east-1",
        config=Config(signature_version=botocore.UNSIGNED),
    )
    urls = unsigned.list_queues()["QueueUrls"]
    assert f"{sqs_server.endpoint_url}/000000000000/wordcount-sentences" in urls


def test_a_taken_port_is_refused_clearly(sqs_server: ElasticMQ) -> None:
    second = ElasticMQ(sqs_server.settings, port=sqs_server.port)
    with pytest.raises(ElasticMQError, match=rf"port {sqs_server.port} .* is already taken"):
        second.start()
    assert second.pid is None


def test_a_remote_endpoint_is_refused(tmp_path: Path) -> None:
    settings = load_settings(
        var_dir=tmp_path, sqs={"endpoint_url": "https://sqs.eu-west-1.amazonaws.com"}
    )
    with pytest.raises(ElasticMQError, match="serves only http on loopback"):
        ElasticMQ(settings, port=free_port()).start()


def test_a_server_that_dies_reports_its_log(tmp_path: Path) -> None:
    broken = tmp_path / "broken.conf"
    broken.write_text("queues {\n")
    port = free_port()
    server = ElasticMQ(settings_for(tmp_path, port), port=port, config=broken)
    with pytest.raises(ElasticMQError, match=r"(?s)exited with \d+; the end of .*ConfigException"):
        server.start(timeout=30)
    assert server.pid is None


def _marked(token: str) -> list[int]:
    needle = f"{MARKER}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_stop_leaves_no_java_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = f"sqs-test-{free_port()}"
    monkeypatch.setenv(MARKER, token)
    port = free_port()
    log = tmp_path / "elasticmq.log"
    with ElasticMQ(settings_for(tmp_path, port), port=port, log_file=log) as server:
        pid = server.pid
        assert pid is not None
        # `ackfold up` finds what it must stop by this marker.
        assert _marked(token) == [pid]
        assert server.queue_names() == ["wordcount-sentences", "wordcount-sentences-dlq"]
    assert server.pid is None
    assert not Path(f"/proc/{pid}").exists()
    assert _marked(token) == []
    assert "ElasticMQ server stopped" in log.read_text()
    server.stop()  # a second stop is harmless
    with ElasticMQ(settings_for(tmp_path, port), port=port, log_file=log) as again:
        assert again.queue_names()  # the port was released
