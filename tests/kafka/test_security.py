"""Kafka with SASL/PLAIN, on a real broker on loopback that takes nothing else: the
confluent-kafka clients (produce, admin, a replay's re-read) and Spark's Kafka source (a
tracked app registering roots) log in with `kafka.sasl_*`, and the password never
shows in a log line or an error. A wrong password is a clear error naming the settings."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ackfold.config import Settings
from ackfold.config.demo import FaultSettings
from ackfold.demo.wordcount import WordCount, with_demo_policy
from ackfold.ledger.schema.tables import ROOTS
from ackfold.sources.base import SourceError
from ackfold.sources.kafka import KafkaTopic
from ackfold.sources.kafka_client import create_topics, existing_topics
from ackfold.sources.kafka_records import Position
from ackfold_dev.kafka_broker import KafkaBroker
from ackfold_dev.ports import free_port
from tests.kafka.conftest import produce, settings_for

PASSWORD = "ackfold-pw-4711"
USERS = {"broker": "broker-pw-0815", "ackfold": PASSWORD}
TOPIC = "sasl-sentences"


def sasl(var: Path, port: int, password: str = PASSWORD, **overrides: Any) -> Settings:
    return settings_for(
        var, port,
        kafka={"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
               "sasl_username": "ackfold", "sasl_password": password, "timeout": "5s"},
        **overrides,
    )  # fmt: skip


@pytest.fixture(scope="module")
def sasl_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    var = tmp_path_factory.mktemp("kafka-sasl")
    broker = KafkaBroker(
        sasl(var, port), port=port, data_dir=var / "kafka", topics=[], sasl_users=USERS
    )
    broker.start()
    try:
        yield port
    finally:
        broker.stop()


def test_the_clients_and_sparks_kafka_source_log_in_and_the_password_is_never_shown(
    spark: SparkSession, sasl_port: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = with_demo_policy(
        sasl(tmp_path / "var", sasl_port,
             apps={"wordcount": {"source": "kafka", "source_queue": TOPIC}})
    )  # fmt: skip
    # Every ackfold logger (librdkafka's lines included) at DEBUG; py4j, which logs each
    # call to the JVM with its arguments at DEBUG, at INFO, as any production process runs it.
    caplog.set_level(logging.INFO)
    with caplog.at_level(logging.DEBUG, "ackfold"):
        assert create_topics(settings, [TOPIC, f"{TOPIC}-dlq"]) == [TOPIC, f"{TOPIC}-dlq"]
        offsets = produce(settings, TOPIC, [(b"k", b'{"seq": 1, "text": "a b"}', [])] * 3)
        app = WordCount(spark, settings, faults=FaultSettings())  # checks the topics first
        assert app.step() == 3, "Spark's Kafka source read the topic through SASL"
        roots = spark.read.format("delta").load(f"{settings.table_root}/{ROOTS}").collect()
        assert sorted(r["source_position"] for r in roots) == [f"{TOPIC}:0:{o}" for o in offsets]
        found = KafkaTopic(settings, TOPIC).reread([Position(TOPIC, 0, offsets[1])])
        assert [r.value for r in found.values()] == [b'{"seq": 1, "text": "a b"}']
    assert PASSWORD not in caplog.text
    assert PASSWORD not in repr(settings)


def test_a_wrong_password_or_none_is_a_clear_error_that_quotes_no_password(
    sasl_port: int, tmp_path: Path
) -> None:
    wrong = sasl(tmp_path, sasl_port, password="not-the-password")
    with pytest.raises(SourceError) as raised:
        existing_topics(wrong)
    message = str(raised.value)
    assert message.startswith(f"Kafka at 127.0.0.1:{sasl_port} refused the login (")
    assert "Authentication failed" in message
    assert "kafka.sasl_username and kafka.sasl_password" in message
    assert "ACKFOLD_KAFKA__SASL_PASSWORD" in message
    assert "not-the-password" not in message
    plain = settings_for(tmp_path, sasl_port, kafka={"timeout": "3s"})
    with pytest.raises(SourceError, match=r"did not answer within 3 s"):
        existing_topics(plain)
