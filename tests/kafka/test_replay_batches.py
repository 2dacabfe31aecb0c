"""The embedded engine's replay against the real Kafka broker, with no JVM of ackfold's
own: records re-read at their positions and produced again in batches by an idempotent
producer, marked sent only once their delivery reports are in; and the broker going down
in the middle of a run (nothing lost; the next run sends exactly the rest)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from ackfold.config import Settings
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import REPLAY_LOG
from ackfold.replay.bookkeeping import PLANNED
from ackfold.replay.planner import SENT
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replay import run_replay
from ackfold.runs.replayer import Replayer
from ackfold.sources.base import ATTEMPT, ORIGIN_ROOT_ID
from ackfold_dev.kafka_broker import KafkaBroker
from ackfold_dev.ports import Downtime, free_port
from tests.kafka.conftest import consume_all, produce, settings_for
from tests.replay_ledger import T0, Failed, read_table, statuses, write_failed

NOW = T0 + timedelta(hours=1)
AUTO = ReplayRequest(automatic=True, requested_by="test")


def embedded(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "engine": settings.engine.model_copy(update={"kind": "embedded"}),
            "replay": settings.replay.model_copy(update={"chunk": 10, "send_attempts": 1}),
            "defaults": settings.defaults.model_copy(update={"replay_rate": 100_000.0}),
        }
    )


def failed_records(settings: Settings, topic: str, count: int) -> list[Failed]:
    """`count` records produced to `topic`, each a failed root at its position."""
    records = [(f"k{n}".encode(), f"value {n}".encode(), [("h", b"x")]) for n in range(count)]
    offsets = produce(settings, topic, records)
    roots = [
        Failed(n, source="kafka", queue=topic, position=f"{topic}:0:{offset}", payload=None)
        for n, offset in enumerate(offsets)
    ]
    write_failed(settings.table_root, roots)
    return roots


def leader_of(settings: Settings, topic: str, wait: float = 60) -> None:
    """Wait until partition 0 of `topic` has a leader again: a broker that restarts answers
    before it has loaded its partitions (Not leader for partition)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    from ackfold.sources.kafka_client import client_config

    consumer = Consumer(client_config(settings, **{"group.id": "test-leader"}))
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=2)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def replays(settings: Settings, topic: str) -> list[Any]:
    """The records of `topic` that a replay produced (they carry the attempt header)."""
    return [r for r in consume_all(settings, topic) if ATTEMPT in dict(r.headers() or [])]


def origins(records: list[Any]) -> Counter[int]:
    return Counter(int(dict(r.headers())[ORIGIN_ROOT_ID]) for r in records)


def test_every_record_is_produced_again_once_with_its_key_value_and_headers(
    kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    settings = embedded(kafka_settings)
    topic = make_topic()
    roots = failed_records(settings, topic, 35)

    summary = run_replay(settings, AUTO, now=NOW)
    assert (summary.selected, summary.sent, summary.not_sent) == (35, 35, 0)
    produced = replays(settings, topic)
    assert origins(produced) == Counter(r.origin for r in roots)
    by_key = {r.key(): r for r in produced}
    assert by_key[b"k7"].value() == b"value 7"
    assert dict(by_key[b"k7"].headers())["h"] == b"x"
    assert {dict(r.headers())[ATTEMPT] for r in produced} == {b"2"}
    log = read_table(settings.table_root, REPLAY_LOG)
    assert Counter(r["event"] for r in log) == {PLANNED: 35, SENT: 35}
    positions = {r["message_id"] for r in log if r["event"] == SENT}
    assert positions == {f"{topic}:{r.partition()}:{r.offset()}" for r in produced}
    assert set(statuses(settings.table_root).values()) == {status.REPLAYED}

    assert run_replay(settings, AUTO, now=NOW).sent == 0
    assert len(replays(settings, topic)) == 35


def test_the_broker_down_mid_run_loses_nothing_and_the_next_run_sends_exactly_the_rest(
    tmp_path: Path,
) -> None:
    port = free_port()
    # A send's timeout: long enough for a first chunk on a loaded machine (2 s was not,
    # beside other tiers), short enough that the broker's absence ends the run quickly.
    settings = embedded(settings_for(tmp_path / "var", port, kafka={"timeout": "8s"}))
    broker = KafkaBroker(settings, port=port, data_dir=tmp_path / "kafka", topics=["in", "in-dlq"])
    broker.start()
    down = Downtime(broker, port)
    try:
        roots = failed_records(settings, "in", 30)
        leader_of(settings, "in")  # a fresh broker answers before it leads its partitions
        replayer = Replayer(None, settings, now=NOW)
        plan = replayer.plan(AUTO)
        summary = replayer.execute(plan, after_send=down)
        replayer.close()
        assert (summary.sent, summary.not_sent) == (10, 20)
        assert "is the broker up?" in (summary.last_error or "")
        done = Counter(statuses(settings.table_root).values())
        assert done == {status.REPLAYED: 10, status.FAILED: 20}

        down.end()
        broker.start()  # the same data: the first chunk's records are there
        leader_of(settings, "in")
        rerun = run_replay(settings, AUTO, now=NOW + timedelta(hours=1))
        assert (rerun.selected, rerun.sent, rerun.resent, rerun.not_sent) == (20, 20, 20, 0)
        assert origins(replays(settings, "in")) == Counter(r.origin for r in roots), "once each"
        log = read_table(settings.table_root, REPLAY_LOG)
        assert Counter(r["root_id"] for r in log if r["event"] == SENT) == Counter(
            r.root_id for r in roots
        )
    finally:
        broker.stop()
        down.end()
