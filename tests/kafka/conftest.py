"""The kafka tier runs against the run's real Kafka broker (KRaft), started from the jar cache
on a free port; tests that stop a broker start one of their own."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ackfold.config import Settings, load_settings
from ackfold.sources.kafka_client import client_config, create_topics
from ackfold_dev.kafka_broker import KafkaBroker
from ackfold_dev.ports import free_port
from tests.conftest import JARS_DIR
from tests.suite import shared_server


def settings_for(var: Path, port: int, **overrides: Any) -> Settings:
    return load_settings(
        var_dir=var, jars_dir=JARS_DIR,
        kafka={"bootstrap_servers": f"127.0.0.1:{port}", "timeout": "5s",
               **overrides.pop("kafka", {})},
        **overrides,
    )  # fmt: skip


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> KafkaBroker:
    """One broker for the whole run, with no topics (each test makes its own), shared by
    every worker (`tests.suite.shared_server`)."""

    def start() -> dict[str, Any]:
        port = free_port()
        broker = KafkaBroker(
            settings_for(tmp_path_factory.mktemp("kafka-var"), port), port=port, topics=[]
        )
        broker.start()
        return {"port": port, "pgid": broker.pid}

    port = shared_server("kafka", start)["port"]
    return KafkaBroker(
        settings_for(tmp_path_factory.mktemp("kafka-var"), port), port=port, topics=[]
    )


@pytest.fixture
def kafka_settings(kafka_broker: KafkaBroker, tmp_path: Path) -> Settings:
    return settings_for(tmp_path / "var", kafka_broker.port)


@pytest.fixture
def make_topic(kafka_settings: Settings) -> Callable[[], str]:
    """Create a uniquely named topic and its `-dlq` topic; returns the topic's name."""

    def make() -> str:
        name = f"test-{uuid.uuid4().hex[:10]}"
        create_topics(kafka_settings, [name, f"{name}-dlq"])
        return name

    return make


def produce(
    settings: Settings,
    topic: str,
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
    partition: int = 0,
) -> list[int]:
    """Produce (key, value, headers) records to one partition; returns their offsets."""
    from confluent_kafka import Producer

    producer = Producer(client_config(settings))
    offsets: list[int] = []
    for key, value, headers in records:
        producer.produce(
            topic, value, key, partition=partition, headers=headers,
            on_delivery=lambda error, record: offsets.append(record.offset()),
        )  # fmt: skip
    assert producer.flush(10) == 0
    return sorted(offsets)


def consume_all(settings: Settings, topic: str) -> list[Any]:
    """Every record of `topic`, read from the start of each partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(client_config(settings, **{"group.id": uuid.uuid4().hex}))
    partitions = consumer.list_topics(topic, timeout=5).topics[topic].partitions
    records: list[Any] = []
    for partition in partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)
        if high <= low:
            continue
        consumer.assign([TopicPartition(topic, partition, low)])
        got: list[Any] = []
        while len(got) < high - low:
            batch = consumer.consume(high - low - len(got), timeout=5)
            assert batch, f"no record of {topic}:{partition} within 5 s"
            got.extend(r for r in batch if r.error() is None)
        records.extend(got)
    consumer.close()
    return records


def delete_before(settings: Settings, topic: str, partition: int, offset: int) -> None:
    """What retention does: move the partition's first offset to `offset`."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(settings))
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    for future in futures.values():
        future.result()
