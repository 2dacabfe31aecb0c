"""The word count on Kafka with the real broker, Spark and Delta: how records become roots
(a malformed one too), and what a replay does when the broker goes down or a record has
expired. The e2e tier's Kafka run covers the rest against the same broker: malformed
records replayed to their last attempt and dead-lettered as they were, and both queries
killed mid-batch and restarted from their checkpoints with nothing lost."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ackfold.config import Settings
from ackfold.config.demo import FaultSettings
from ackfold.demo.wordcount import WordCount, with_demo_policy
from ackfold.ledger.schema import ids, status
from ackfold.ledger.schema.tables import DEAD_LETTERS, REPLAY_LOG, ROOT_STATE, ROOTS
from ackfold.replay.request import ReplayRequest
from ackfold.runs import run_quality
from ackfold.runs.reconcile import reconcile
from ackfold.runs.replayer import Replayer
from ackfold.sources.base import ATTEMPT, DEAD_REASON, EXPIRED, ORIGIN_ROOT_ID, SourceError
from ackfold.sources.kafka import RECREATED
from ackfold.sources.kafka_client import topic_ids
from ackfold.sources.kafka_records import message_id
from ackfold_dev.kafka_broker import KafkaBroker
from ackfold_dev.ports import Downtime, free_port
from tests.kafka.conftest import consume_all, delete_before, produce, settings_for

Records = list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]


def app_settings(base: Settings, topic: str, **kafka: Any) -> Settings:
    port = int(base.kafka.bootstrap_servers.rsplit(":", 1)[1])
    return with_demo_policy(
        settings_for(
            base.var_dir, port, kafka=kafka,
            apps={"wordcount": {"source": "kafka", "source_queue": topic}},
            replay={"send_attempts": 1, "chunk": 10},
        )
    )  # fmt: skip


def sentences(n: int, first: int = 0) -> Records:
    return [
        (str(i).encode(), json.dumps({"seq": i, "text": f"word {i}"}).encode(), [])
        for i in range(first, first + n)
    ]


def table(spark: SparkSession, settings: Settings, name: str) -> Any:
    return spark.read.format("delta").load(f"{settings.table_root}/{name}")


def test_records_register_as_roots_at_their_position_and_odd_headers_make_a_new_message(
    spark: SparkSession, kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    topic_id = topic_ids(kafka_settings, [topic])[topic]
    origin = ids.root_id("wordcount", f"kafka:{topic}:{message_id(topic_id, 0, 0)}")
    replay_headers = [(ATTEMPT, b"2"), (ORIGIN_ROOT_ID, str(origin).encode())]
    records: Records = [
        *sentences(2),
        (b"r", b'{"seq": 7, "text": "again"}', replay_headers),
        (b"x", b'{"seq": 8, "text": "odd"}', [(ATTEMPT, b"two"), (ORIGIN_ROOT_ID, b"1")]),
        (b"t", None, []),  # a tombstone: malformed, yet a root like any other
    ]  # fmt: skip
    offsets = produce(kafka_settings, topic, records)
    settings = app_settings(kafka_settings, topic)
    app = WordCount(spark, settings, faults=FaultSettings())
    assert app.step() == 5

    roots = {r["source_position"]: r for r in table(spark, settings, ROOTS).collect()}
    assert sorted(roots) == sorted(f"{topic}:0:{o}" for o in offsets)
    for offset, root in zip(offsets, (roots[f"{topic}:0:{o}"] for o in offsets), strict=True):
        assert root["source"] == "kafka"
        assert root["source_queue"] == topic
        assert root["source_message_id"] == f"0:{offset}@{topic_id}"
        assert root["payload"] is None, "kafka.store_payload is off: a replay re-reads"
    first, _, replayed, odd, _ = (roots[f"{topic}:0:{o}"] for o in offsets)
    assert first["root_id"] == origin
    assert first["attempt"] == 1
    assert replayed["attempt"] == 2
    assert replayed["origin_root_id"] == origin
    assert replayed["root_id"] == ids.root_id("wordcount", "", 2, origin)
    assert odd["attempt"] == 1, "headers that are not a valid attempt are ignored"
    assert odd["root_id"] == ids.root_id(
        "wordcount", f"kafka:{topic}:{message_id(topic_id, 0, offsets[3])}"
    )

    reconcile(spark, settings, app="wordcount")
    states = {r["root_id"]: r for r in table(spark, settings, ROOT_STATE).collect()}
    tombstone = roots[f"{topic}:0:{offsets[4]}"]
    assert states[tombstone["root_id"]]["status"] == status.FAILED
    assert "malformed message" in states[tombstone["root_id"]]["fail_reason"]
    assert sum(s["status"] == status.COMPLETED for s in states.values()) == 4


def test_an_app_on_a_topic_that_does_not_exist_fails_at_start_up(
    spark: SparkSession, kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    settings = app_settings(kafka_settings, "no-such-topic")
    with pytest.raises(SourceError) as raised:
        WordCount(spark, settings)
    assert str(raised.value).startswith(
        "Kafka topic(s) no-such-topic (apps.wordcount.source_queue) do not exist at 127.0.0.1:"
    )
    retry = settings.apps["wordcount"].model_copy(
        update={"source_queue": make_topic(), "retry_queue": "no-retry"}
    )
    with pytest.raises(SourceError, match=r"no-retry \(apps.wordcount.retry_queue\)"):
        WordCount(spark, settings.model_copy(update={"apps": {"wordcount": retry}}))


def test_the_broker_going_down_during_a_replay_is_a_clear_error_and_the_rerun_sends_the_rest(
    spark: SparkSession, tmp_path: Path
) -> None:
    port = free_port()
    base = settings_for(tmp_path / "var", port, kafka={"timeout": "2s"})
    broker = KafkaBroker(base, port=port, data_dir=tmp_path / "kafka", topics=["in", "in-dlq"])
    broker.start()
    down = Downtime(broker, port)
    try:
        settings = app_settings(base, "in", timeout="2s")
        produce(settings, "in", [(k, b"not json", h) for k, _, h in sentences(30)])
        app = WordCount(spark, settings, faults=FaultSettings())
        app.step()
        reconcile(spark, settings, app="wordcount")

        replayer = Replayer(spark, settings)
        plan = replayer.plan(ReplayRequest(app="wordcount", requested_by="test"))
        assert len(plan.sends) == 30
        summary = replayer.execute(plan, after_send=down)
        assert summary.sent == 10, "the first chunk went out before the broker stopped"
        assert summary.not_sent == 20
        assert "did not answer within 2 s" in (summary.last_error or "")
        assert "is the broker up?" in (summary.last_error or "")

        down.end()
        broker.start()  # the same data: the first chunk's records are still there
        rerun = Replayer(spark, settings)
        summary = rerun.execute(rerun.plan(ReplayRequest(app="wordcount", requested_by="test")))
        assert summary.sent == 20
        assert summary.resent == 20
        assert summary.not_sent == 0
        replays = [r for r in consume_all(settings, "in") if dict(r.headers() or [])]
        origins = [dict(r.headers())[ORIGIN_ROOT_ID] for r in replays]
        assert len(origins) == len(set(origins)) == 30, "each root sent once, none twice"
        log = table(spark, settings, REPLAY_LOG)
        assert log.where("event = 'sent'").groupBy("root_id").count().where("count > 1").isEmpty()
    finally:
        broker.stop()
        down.end()


def test_an_expired_record_is_dead_lettered_and_the_quality_checks_count_it_lost(
    spark: SparkSession, kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    produce(kafka_settings, topic, [(k, b"not json", h) for k, _, h in sentences(3)], partition=0)
    produce(kafka_settings, topic, sentences(3, first=3), partition=1)
    settings = app_settings(kafka_settings, topic)
    app = WordCount(spark, settings, faults=FaultSettings())
    app.step()
    reconcile(spark, settings, app="wordcount")
    request = ReplayRequest(app="wordcount", requested_by="test")
    replayer = Replayer(spark, settings)
    planned = replayer.plan(request)
    delete_before(settings, topic, 0, 3)  # retention deletes partition 0's failed records

    # Planned before retention struck: each send fails alone, and says so.
    summary = replayer.execute(planned)
    assert (summary.sent, summary.not_sent) == (0, 3)
    assert (summary.last_error or "").startswith(f"{EXPIRED} at {topic}:0:")
    # The next run dead-letters them.
    summary = replayer.execute(replayer.plan(request))
    assert (summary.sent, summary.dead_lettered) == (0, 3)
    dead = table(spark, settings, DEAD_LETTERS).collect()
    assert sorted(r["reason"] for r in dead) == [EXPIRED] * 3
    states = table(spark, settings, ROOT_STATE).where(F.col("status") == status.DEAD_LETTERED)
    assert sorted(r["root_id"] for r in states.collect()) == sorted(r["root_id"] for r in dead)
    letters = consume_all(settings, f"{topic}-dlq")
    assert [(r.value(), dict(r.headers())[DEAD_REASON].decode()) for r in letters] == [
        (None, EXPIRED)
    ] * 3

    # Asked by hand, a replay of those dead letters has nothing left to send.
    again = replayer.plan(
        ReplayRequest(app="wordcount", statuses=(status.DEAD_LETTERED,), requested_by="test")
    )
    assert again.sends == []
    assert again.skipped == {f"{EXPIRED}: nothing left to replay": 3}

    report = run_quality(
        settings, spark=spark, app="wordcount", now=datetime.now(UTC) + timedelta(hours=1)
    )
    [lost] = [r for r in report.results if r.check == "no_lost_roots"]
    assert not lost.success
    assert lost.observed == "3 of 6 rows", "the expired ones; the other 3 completed"
    assert sum(f"{EXPIRED} before its replay" in line for line in lost.sample) == 3, lost.sample


def test_a_malformed_position_is_dead_lettered_and_a_deleted_topic_skipped_the_rest_sent(
    spark: SparkSession, kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    """Roots written by a producer outside Spark: three failed at real positions of one
    topic, one whose `source_position` does not parse, two of a topic deleted since. The
    replay dead-letters the malformed one (with the reason, no value), skips the deleted
    topic's two and says why, and sends the three; once the topic is back, a replay sends
    those too."""
    from confluent_kafka.admin import AdminClient

    from ackfold.sources.kafka_client import client_config, create_topics, existing_topics
    from ackfold.track.tracker import Tracker
    from tests.ledger_fixtures import write_rows

    kept, deleted = make_topic(), make_topic()
    offsets = {
        kept: produce(kafka_settings, kept, sentences(4)),
        deleted: produce(kafka_settings, deleted, sentences(2)),
    }
    settings = app_settings(kafka_settings, kept)
    tracker = Tracker("wordcount")
    positions = [(kept, f"{kept}:0:{o}") for o in offsets[kept][:3]]
    positions += [(kept, "not-a-position")]
    positions += [(deleted, f"{deleted}:0:{o}") for o in offsets[deleted]]
    for topic, position in positions:
        first = tracker.spout(position, source="kafka", source_queue=topic,
                              source_position=position)  # fmt: skip
        tracker.fail(first, stage="split", reason="bad record")
    write_rows(settings.table_root, ROOTS, tracker.drain_roots())
    write_rows(settings.table_root, "ack_events", tracker.drain())
    reconcile(spark, settings, app="wordcount")
    admin = AdminClient(client_config(settings))  # kept: its futures need it alive
    admin.delete_topics([deleted])[deleted].result()
    wait_for(lambda: deleted not in existing_topics(settings), f"{deleted} deleted")

    replayer = Replayer(spark, settings)
    request = ReplayRequest(app="wordcount", requested_by="test")
    plan = replayer.plan(request)
    servers = settings.kafka.bootstrap_servers
    assert plan.skipped == {f"cannot re-read it: topic {deleted} does not exist at {servers}": 2}
    summary = replayer.execute(plan)
    assert (summary.sent, summary.dead_lettered, summary.not_sent) == (3, 1, 0)
    [dead] = table(spark, settings, DEAD_LETTERS).collect()
    assert dead["reason"].startswith("malformed source_position: 'not-a-position' is not a")
    [letter] = consume_all(settings, f"{kept}-dlq")
    assert letter.value() is None
    assert dict(letter.headers())[DEAD_REASON].decode() == dead["reason"]
    replays = [r for r in consume_all(settings, kept) if dict(r.headers() or [])]
    assert sorted(r.value() for r in replays) == sorted(v for _, v, _ in sentences(4)[:3])

    # Back, empty: its records went with it. (Kafka may still be finishing the delete.)
    wait_for(lambda: bool(create_topics(settings, [deleted])), f"{deleted} created again")
    plan = replayer.plan(request)
    assert plan.skipped == {}
    summary = replayer.execute(plan)
    assert summary.dead_lettered == 2, "expired: the new topic does not hold them"


def test_a_topic_created_again_gives_new_root_ids_and_its_old_roots_are_not_replayed_from_it(
    spark: SparkSession, kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    """A topic deleted and created again starts its offsets over: its new records get root
    ids of their own (not those of the old records at the same offsets), and a failed
    root of the old topic is dead-lettered with the reason, not replayed with whatever
    record now sits at its offset."""
    import shutil

    from confluent_kafka.admin import AdminClient

    from ackfold.sources.kafka_client import client_config, create_topics, existing_topics

    topic = make_topic()
    settings = app_settings(kafka_settings, topic)
    produce(settings, topic, [*sentences(1), (b"x", b"not json", [])])
    WordCount(spark, settings, faults=FaultSettings()).step()
    reconcile(spark, settings, app="wordcount")
    before = {r["source_position"]: r for r in table(spark, settings, ROOTS).collect()}
    old_id = topic_ids(settings, [topic])[topic]

    admin = AdminClient(client_config(settings))  # kept: its futures need it alive
    admin.delete_topics([topic])[topic].result()
    wait_for(lambda: topic not in existing_topics(settings), f"{topic} deleted")
    wait_for(lambda: bool(create_topics(settings, [topic])), f"{topic} created again")
    new_id = topic_ids(settings, [topic])[topic]
    assert new_id != old_id
    produce(settings, topic, sentences(2, first=10))
    # Offsets went back to 0: the app starts from a new checkpoint, as after any re-creation.
    shutil.rmtree(f"{settings.table_root}/_checkpoints/apps/wordcount")
    WordCount(spark, settings, faults=FaultSettings()).step()
    reconcile(spark, settings, app="wordcount")

    roots = table(spark, settings, ROOTS).collect()
    assert len({r["root_id"] for r in roots}) == 4, "two records at offsets 0 and 1, twice"
    after = [r for r in roots if r["source_message_id"].endswith(f"@{new_id}")]
    assert sorted(r["source_position"] for r in after) == sorted(before)
    assert all(r["root_id"] != before[r["source_position"]]["root_id"] for r in after)

    states = {r["root_id"]: r["status"] for r in table(spark, settings, ROOT_STATE).collect()}
    assert [states[r["root_id"]] for r in after] == [status.COMPLETED] * 2
    [failed] = [r for r in before.values() if states[r["root_id"]] == status.FAILED]
    replayer = Replayer(spark, settings)
    [send] = replayer.plan(ReplayRequest(app="wordcount", requested_by="test")).sends
    assert (send.root_id, send.action) == (failed["root_id"], "dead_letter")
    assert send.reason is not None
    assert send.reason.startswith(f"{RECREATED}: topic {topic}")
    assert f"topic id {old_id}, now {new_id}" in send.reason


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except Exception:  # Kafka refuses to create a topic that is still being deleted
            pass
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.5)
