"""KafkaTopic against the real broker: a replay re-reads the record at its position and
produces it again with the new attempt's headers; dead letters carry their reason;
expired records are found, and an unknown topic is a clear error."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ackfold.config import Settings
from ackfold.sources.base import (
    ATTEMPT,
    DEAD_REASON,
    DEAD_ROOT_ID,
    EXPIRED,
    ORIGIN_ROOT_ID,
    Outbound,
    SourceError,
    dead_letter_attributes,
)
from ackfold.sources.kafka import KafkaTopic
from ackfold.sources.kafka_client import check_topics, create_topics, topic_ids
from ackfold.sources.kafka_records import Position
from ackfold_dev.kafka_broker import KafkaBroker, KafkaBrokerError
from tests.kafka.conftest import consume_all, delete_before, produce, settings_for


def headers(record: object) -> dict[str, str]:
    return {k: v.decode() for k, v in (record.headers() or [])}  # type: ignore[attr-defined]


def test_republish_re_reads_the_record_at_its_offset_with_the_new_attempts_headers(
    kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    offsets = produce(
        kafka_settings, topic,
        [(b"k0", b"first", []), (b"k1", b"second", [("trace", b"t-1"), (ATTEMPT, b"1")])],
    )  # fmt: skip
    queue = KafkaTopic(kafka_settings, topic)
    [sent] = queue.republish([Outbound(7, 7, 2, None, position=f"{topic}:0:{offsets[1]}")])
    assert sent.ok, sent.error
    new = Position.parse(sent.message_id or "")
    records = consume_all(kafka_settings, topic)
    assert len(records) == 3
    [again] = [r for r in records if (r.partition(), r.offset()) == (new.partition, new.offset)]
    assert new.topic == topic
    assert again.value() == b"second"
    assert again.key() == b"k1"
    # The record's own headers stay; the attempt's replace any it had.
    assert headers(again) == {"trace": "t-1", ORIGIN_ROOT_ID: "7", ATTEMPT: "2"}


def test_republish_goes_to_the_retry_topic_when_one_is_set(
    kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    topic, retry = make_topic(), make_topic()
    [offset] = produce(kafka_settings, topic, [(None, b"body", [])])
    queue = KafkaTopic(kafka_settings, topic, retry_topic=retry)
    assert queue.replay_queue == retry
    [sent] = queue.republish([Outbound(5, 5, 2, None, position=f"{topic}:0:{offset}")])
    assert sent.ok
    assert (sent.message_id or "").startswith(f"{retry}:")
    assert [r.value() for r in consume_all(kafka_settings, retry)] == [b"body"]
    assert len(consume_all(kafka_settings, topic)) == 1, "nothing went back to the source"


def test_dead_letter_goes_to_the_dead_letter_topic_with_its_reason(
    kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    [offset] = produce(kafka_settings, topic, [(b"k", b'{"seq": ', [])])
    queue = KafkaTopic(kafka_settings, topic)
    attributes = dead_letter_attributes(9, "failed in split: malformed message", "split")
    [sent] = queue.dead_letter(
        [Outbound(9, 3, 4, None, attributes, position=f"{topic}:0:{offset}")]
    )
    assert sent.ok, sent.error
    [letter] = consume_all(kafka_settings, f"{topic}-dlq")
    assert letter.value() == b'{"seq": '
    assert letter.key() == b"k"
    assert headers(letter)[DEAD_REASON] == "failed in split: malformed message"
    assert headers(letter)[DEAD_ROOT_ID] == "9"


def test_records_deleted_by_retention_are_expired_and_dead_lettered_without_a_value(
    kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    offsets = produce(kafka_settings, topic, [(None, f"m{i}".encode(), []) for i in range(4)])
    delete_before(kafka_settings, topic, 0, 2)  # what retention does to the oldest records
    queue = KafkaTopic(kafka_settings, topic)
    positions = [f"{topic}:0:{o}" for o in offsets]
    assert queue.expired(positions) == set(positions[:2])

    # A replay of an expired record with no stored copy cannot be sent: it says why, and
    # the records still there go out all the same.
    expired, alive = queue.republish(
        [Outbound(1, 1, 2, None, position=positions[0]),
         Outbound(3, 3, 2, None, position=positions[3])]
    )  # fmt: skip
    assert not expired.ok
    assert EXPIRED in (expired.error or "")
    assert alive.ok
    # With a stored copy (kafka.store_payload), the copy goes out.
    [sent] = queue.republish([Outbound(2, 2, 2, "m1 copy", position=positions[1])])
    assert sent.ok
    # Its dead letter carries the reason, and no value.
    attributes = dead_letter_attributes(1, EXPIRED, None)
    [sent] = queue.dead_letter([Outbound(1, 1, 2, None, attributes, position=positions[0])])
    assert sent.ok
    [letter] = consume_all(kafka_settings, f"{topic}-dlq")
    assert letter.value() is None
    assert headers(letter)[DEAD_REASON] == EXPIRED


def test_an_unknown_topic_is_a_clear_error_naming_the_setting(
    kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    with pytest.raises(SourceError, match=r"nope \(apps.orders.retry_queue\) do not exist at"):
        check_topics(
            kafka_settings,
            {topic: "apps.orders.source_queue", "nope": "apps.orders.retry_queue"},
        )
    queue = KafkaTopic(kafka_settings, topic, dead_letter_queue="missing-dlq")
    [sent] = queue.dead_letter([Outbound(1, 1, 2, "x", position=None)])
    assert not sent.ok
    assert "missing-dlq do not exist" in (sent.error or "")


def test_a_topic_created_a_moment_ago_is_waited_for_up_to_kafka_timeout(
    kafka_broker: KafkaBroker, kafka_settings: Settings, tmp_path: Path
) -> None:
    """What a spout does each micro-batch (`KafkaSpout.register`): look up its topics' ids.
    A topic the brokers do not know yet (created a moment ago, its metadata on its way)
    is waited for; one that never comes is an error after `kafka.timeout`, naming it."""
    late = f"test-late-{uuid.uuid4().hex[:10]}"
    creating = threading.Timer(1.5, create_topics, args=(kafka_settings, [late]))
    creating.start()
    try:
        started = time.monotonic()
        ids = topic_ids(kafka_settings, [late])
        waited = time.monotonic() - started
    finally:
        creating.join()
    assert set(ids) == {late}, ids
    assert 1.0 < waited < 5, "waited for the topic, within kafka.timeout (5 s)"
    quick = settings_for(tmp_path / "var", kafka_broker.port, kafka={"timeout": "2s"})
    started = time.monotonic()
    with pytest.raises(
        SourceError, match=r"never-made do not exist at .* after 2 s, kafka\.timeout"
    ):
        topic_ids(quick, [late, "never-made"])
    assert 1.5 < time.monotonic() - started < 10


def test_positions_that_are_not_topic_partition_offset_are_refused() -> None:
    for text in ("orders", "orders:1", "orders:a:3", ":0:1", "orders:0:-1"):
        with pytest.raises(ValueError, match="is not a Kafka position topic:partition:offset"):
            Position.parse(text)
    assert Position.parse("a:b:0:12") == Position("a:b", 0, 12)


def test_a_broker_that_is_down_is_a_clear_error(tmp_path: Path) -> None:
    from ackfold_dev.ports import free_port, port_held

    port = free_port()
    settings = settings_for(tmp_path, port, kafka={"timeout": "1s"})
    with port_held(port):
        with pytest.raises(SourceError, match=r"did not answer within 1 s .*is the broker up\?"):
            check_topics(settings, {"orders": "apps.orders.source_queue"})
        [sent] = KafkaTopic(settings, "orders").republish([Outbound(1, 1, 2, "x")])
    assert not sent.ok
    assert "is the broker up?" in (sent.error or "")


def test_the_broker_refuses_a_taken_port_and_a_remote_address(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    taken = KafkaBroker(kafka_broker.settings, port=kafka_broker.port, data_dir=tmp_path, topics=[])
    with pytest.raises(KafkaBrokerError, match=rf"port {kafka_broker.port} .* already taken"):
        taken.start()
    remote = settings_for(tmp_path, 9092, kafka={"bootstrap_servers": "10.1.2.3:9092"})
    with pytest.raises(KafkaBrokerError, match="serves only loopback"):
        KafkaBroker(remote, data_dir=tmp_path, topics=[]).start()
