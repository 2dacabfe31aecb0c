"""The sqs tier runs against the run's real ElasticMQ, started from the jar cache on a free port."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest

from ackfold.config import Settings, load_settings
from ackfold.sources.sqs_client import sqs_client
from ackfold_dev.elasticmq import ElasticMQ
from ackfold_dev.ports import free_port
from tests.conftest import JARS_DIR
from tests.suite import shared_server


def settings_for(var: Any, port: int) -> Settings:
    return load_settings(
        var_dir=var, jars_dir=JARS_DIR, sqs={"endpoint_url": f"http://127.0.0.1:{port}"}
    )


@pytest.fixture(scope="session")
def sqs_server(tmp_path_factory: pytest.TempPathFactory) -> ElasticMQ:
    """One ElasticMQ for the whole run, with the bundled config (the demo queues), shared by
    every worker (`tests.suite.shared_server`); tests make queues of their own."""

    def start() -> dict[str, Any]:
        port = free_port()
        server = ElasticMQ(settings_for(tmp_path_factory.mktemp("sqs-var"), port), port=port)
        server.start()
        return {"port": port, "pgid": server.pid}

    port = shared_server("elasticmq", start)["port"]
    return ElasticMQ(settings_for(tmp_path_factory.mktemp("sqs-var"), port), port=port)


@pytest.fixture
def sqs(sqs_server: ElasticMQ) -> Any:
    """A boto3 SQS client for the tier's server, built as ackfold builds its own."""
    return sqs_client(sqs_server.settings)


class Queue(NamedTuple):
    name: str
    url: str
    dlq_url: str | None


@pytest.fixture
def make_queue(sqs: Any) -> Iterator[Callable[..., Queue]]:
    """Create a uniquely named queue (FIFO, with a dead-letter queue: optional); delete it after.

    `make_queue(fifo=True, dlq=True, max_receive_count=2, VisibilityTimeout="5")`: the
    keyword arguments left over are queue attributes.
    """
    created: list[str] = []

    def create(name: str, fifo: bool, attributes: dict[str, str]) -> str:
        if fifo:
            name += ".fifo"
            attributes = {"FifoQueue": "true", **attributes}
        url: str = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        created.append(url)
        return url

    def make(
        *, fifo: bool = False, dlq: bool = False, max_receive_count: int = 3, **attributes: str
    ) -> Queue:
        name = f"test-{uuid.uuid4().hex[:12]}"
        dlq_url = None
        if dlq:
            dlq_url = create(f"{name}-dlq", fifo, {})
            arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])
            policy = {
                "deadLetterTargetArn": arn["Attributes"]["QueueArn"],
                "maxReceiveCount": str(max_receive_count),
            }
            attributes = {"RedrivePolicy": json.dumps(policy), **attributes}
        url = create(name, fifo, attributes)
        return Queue(url.rsplit("/", 1)[-1], url, dlq_url)

    yield make
    for url in reversed(created):
        sqs.delete_queue(QueueUrl=url)
