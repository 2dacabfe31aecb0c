"""Kafka as a source queue, through confluent-kafka: re-read, republish, dead-letter.

A Kafka record stays readable after it is consumed, so a root points at its record,
`topic:partition:offset` (`roots.source_position`), instead of keeping a copy. A replay
re-reads the record there and produces it again, key, value and headers, with the
`origin_root_id` and `attempt` headers of the new attempt: to the source topic, or to the
app's retry topic. A root out of attempts goes to the dead-letter topic the same way. A
record that retention has already deleted cannot be replayed: `expired` finds those
before a replay plans them, and the replay dead-letters them with `EXPIRED`.

Reading the stream is Spark's own Kafka source (`ackfold.sources.kafka_spout`); its checkpoint is
the acknowledgement, so ackfold never commits consumer offsets.

Example:
    >>> topic = KafkaTopic(settings, "wordcount-sentences")          # doctest: +SKIP
    >>> topic.expired(["wordcount-sentences:0:0"])                   # doctest: +SKIP
    set()
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ackfold.config import Settings
from ackfold.sources.base import (
    DEAD_REASON,
    EXPIRED,
    Outbound,
    Sent,
    SourceError,
    SourceQueue,
    Unreadable,
)
from ackfold.sources.kafka_client import (
    client_config,
    existing_topics,
    timeout_seconds,
    topic_ids,
    unreachable,
)
from ackfold.sources.kafka_records import Position, Record, replay_headers, topic_id_of

log = logging.getLogger("ackfold.sources.kafka")

# A replay's re-read reads on through gaps of up to this many offsets rather than seek.
_MAX_SKIP = 100
# The dead-letter reason of a root whose topic was re-created: its record is gone.
RECREATED = "source topic re-created"


def _gone_codes() -> frozenset[int]:
    from confluent_kafka import KafkaError

    # The offset is out of range; with auto.offset.reset=error librdkafka says so as -140.
    return frozenset({KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET})


class KafkaTopic(SourceQueue):
    """One source topic, by name: where its replays go (`retry_topic`, else the topic
    itself) and its dead-letter topic (`dead_letter_queue`, by default `<topic>-dlq`)."""

    source = "kafka"
    rereads: ClassVar[bool] = True
    # One re-read and one flush per call: a thousand records share their round trips.
    batch_size: ClassVar[int] = 1000

    def __init__(
        self,
        settings: Settings,
        topic: str,
        *,
        dead_letter_queue: str | None = None,
        retry_topic: str | None = None,
    ) -> None:
        super().__init__(topic)
        self.settings = settings
        self.retry_topic = retry_topic or topic
        self._dead_letter_queue = dead_letter_queue
        self._producer: Any = None
        self._consumer: Any = None
        self._known: set[str] = set()

    @property
    def dead_letter_queue(self) -> str:
        return self._dead_letter_queue or f"{self.queue}-dlq"

    @property
    def replay_queue(self) -> str:
        return self.retry_topic

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._producer is not None:
            self._producer.flush(timeout_seconds(self.settings))
            self._producer.close()
            self._producer = None

    # -- expiry ---------------------------------------------------------------------------

    def expired(self, positions: Iterable[str]) -> set[str]:
        """The positions whose records are gone: before the partition's first offset
        (retention or DeleteRecords deleted them) or past its end (the topic was
        recreated). `SourceError` if Kafka does not answer or a topic does not exist."""
        from confluent_kafka import KafkaException, TopicPartition

        parsed = [Position.parse(p) for p in positions]
        self._require({p.topic for p in parsed})
        consumer = self._reader()
        bounds: dict[tuple[str, int], tuple[int, int]] = {}
        gone: set[str] = set()
        for position in parsed:
            key = (position.topic, position.partition)
            if key not in bounds:
                try:
                    bounds[key] = consumer.get_watermark_offsets(
                        TopicPartition(*key), timeout=timeout_seconds(self.settings)
                    )
                except KafkaException as exc:
                    raise unreachable(self.settings, exc.args[0]) from None
            low, high = bounds[key]
            if not low <= position.offset < high:
                gone.add(str(position))
        return gone

    def unreadable(
        self, positions: Iterable[str], message_ids: Mapping[str, str | None] | None = None
    ) -> dict[str, Unreadable]:
        """Positions that do not parse as `topic:partition:offset` (final); positions in
        topics that do not exist (deleted: skipped until they are back); and positions in
        a topic re-created since the record was read (final: its offsets now hold other
        records), told by the topic id in `message_ids` (roots registered without one are
        not checked)."""
        found: dict[str, Unreadable] = {}
        topics: dict[str, str] = {}
        for text in positions:
            try:
                topics[text] = Position.parse(text).topic
            except ValueError as exc:
                found[text] = Unreadable(f"malformed source_position: {exc}", final=True)
        missing = set(topics.values()) - self._known
        if missing:
            missing -= existing_topics(self.settings, self._reader())
            self._known |= set(topics.values()) - missing
        servers = self.settings.kafka.bootstrap_servers
        for text, topic in topics.items():
            if topic in missing:
                found[text] = Unreadable(f"topic {topic} does not exist at {servers}", final=False)
        read_in = {
            text: topic_id_of((message_ids or {}).get(text))
            for text, topic in topics.items()
            if topic not in missing
        }
        now = topic_ids(self.settings, {topics[t] for t, was in read_in.items() if was})
        for text, was in read_in.items():
            topic = topics[text]
            if was and was != now[topic]:
                found[text] = Unreadable(
                    f"{RECREATED}: topic {topic} was deleted and created again since the "
                    f"record was read (topic id {was}, now {now[topic]})",
                    final=True,
                )
        return found

    # -- sending --------------------------------------------------------------------------

    def republish(self, messages: Sequence[Outbound]) -> list[Sent]:
        return self._send(self.retry_topic, messages)

    def dead_letter(self, messages: Sequence[Outbound]) -> list[Sent]:
        return self._send(self.dead_letter_queue, messages)

    def _send(self, target: str, messages: Sequence[Outbound]) -> list[Sent]:
        try:
            self._require({target})
            positions = [Position.parse(m.position) for m in messages if m.position]
            found = self.reread(positions)
        except SourceError as exc:
            return [Sent(m.root_id, error=str(exc)) for m in messages]
        records = {m.root_id: self._record(m, found) for m in messages}
        sendable = [m for m in messages if records[m.root_id] is not None]
        sent = {s.root_id: s for s in self._produce(target, sendable, records)}
        expired = f"{EXPIRED} at %s: the next replay run dead-letters it"
        return [
            sent.get(m.root_id) or Sent(m.root_id, error=expired % m.position) for m in messages
        ]

    def _record(self, message: Outbound, found: Mapping[Position, Record]) -> Record | None:
        """What to produce for `message`: the record re-read at its position, else its
        stored copy; a dead letter whose record expired goes out with no value. None: the
        record expired after the replay was planned, and only a dead letter can say so."""
        record = found.get(Position.parse(message.position)) if message.position else None
        if record is not None:
            return record
        if message.body is not None:
            return Record(None, message.body.encode("utf-8"), [])
        # A dead letter with nothing to re-read (its position did not parse) goes out empty.
        if message.attributes.get(DEAD_REASON) == EXPIRED or (
            DEAD_REASON in message.attributes and not message.position
        ):
            return Record(None, None, [])
        return None

    def reread(self, positions: Iterable[Position]) -> dict[Position, Record]:
        """The records at `positions`; a position whose record no longer exists is left
        out. Reads each partition forward from its first position, seeking only across
        gaps wider than `_MAX_SKIP`: failures tend to come in runs of nearby offsets."""
        wanted: dict[tuple[str, int], list[int]] = {}
        for position in positions:
            wanted.setdefault((position.topic, position.partition), []).append(position.offset)
        found: dict[Position, Record] = {}
        for (topic, partition), offsets in wanted.items():
            todo = sorted(set(offsets))
            while todo:
                run = [todo[0]]
                for offset in todo[1:]:
                    if offset - run[-1] > _MAX_SKIP:
                        break
                    run.append(offset)
                todo = todo[len(run) :]
                found.update(self._read_run(topic, partition, run))
        return found

    def _first_offset(self, topic: str, partition: int) -> int:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            low, _ = self._reader().get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_seconds(self.settings)
            )
        except KafkaException as exc:
            raise unreachable(self.settings, exc.args[0]) from None
        return int(low)

    def _read_run(self, topic: str, partition: int, offsets: list[int]) -> dict[Position, Record]:
        """Read `offsets[0]..offsets[-1]` of one partition, keeping the records asked for."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        consumer = self._reader()
        first, last, wanted = offsets[0], offsets[-1], set(offsets)
        consumer.assign([TopicPartition(topic, partition, first)])
        found: dict[Position, Record] = {}
        at = first
        while at <= last:
            try:
                batch = consumer.consume(
                    min(500, last - at + 1), timeout=timeout_seconds(self.settings)
                )
            except KafkaException as exc:
                raise unreachable(self.settings, exc.args[0]) from None
            if not batch:
                # Nothing more within the timeout: the rest is gone, or Kafka is.
                left = [str(Position(topic, partition, o)) for o in offsets if o >= at]
                if set(left) <= self.expired(left):
                    break
                raise unreachable(self.settings, f"no record at {left[0]}")
            for record in batch:
                error = record.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at = last + 1
                    elif error.code() in _gone_codes():
                        # Retention deleted the start of the run: read on from what is left.
                        at = max(at + 1, self._first_offset(topic, partition))
                        consumer.assign([TopicPartition(topic, partition, at)])
                    else:
                        raise SourceError(
                            f"Kafka could not read {topic}:{partition}: {error.str()}"
                        )
                    break
                # A compacted partition skips offsets that no longer exist.
                at = record.offset() + 1
                if record.offset() in wanted:
                    position = Position(topic, partition, record.offset())
                    found[position] = Record(
                        record.key(), record.value(), list(record.headers() or [])
                    )
        return found

    def _produce(
        self, target: str, messages: Sequence[Outbound], records: Mapping[int, Record | None]
    ) -> list[Sent]:
        from confluent_kafka import KafkaException

        producer = self._writer()
        results: dict[int, Sent] = {}

        def delivered(root_id: int) -> Any:
            def report(error: Any, record: Any) -> None:
                if error is not None:
                    results[root_id] = Sent(root_id, error=self._produce_error(target, error))
                else:
                    position = Position(record.topic(), record.partition(), record.offset())
                    results[root_id] = Sent(root_id, message_id=str(position))

            return report

        for message in messages:
            record = records[message.root_id]
            assert record is not None
            try:
                producer.produce(
                    target,
                    value=record.value,
                    key=record.key,
                    headers=replay_headers(record.headers, message),
                    on_delivery=delivered(message.root_id),
                )
            except (BufferError, KafkaException) as exc:
                results[message.root_id] = Sent(message.root_id, error=f"{target}: {exc}")
            producer.poll(0)
        producer.flush(timeout_seconds(self.settings) * 2)
        return [
            results.get(m.root_id)
            or Sent(m.root_id, error=self._produce_error(target, "no delivery report"))
            for m in messages
        ]

    def _produce_error(self, target: str, error: Any) -> str:
        text = error.str() if hasattr(error, "str") else str(error)
        return (
            f"Kafka at {self.settings.kafka.bootstrap_servers} did not take the record for "
            f"{target} within {timeout_seconds(self.settings):g} s ({text}): is the broker up?"
        )

    # -- plumbing -------------------------------------------------------------------------

    def _require(self, topics: set[str]) -> None:
        """`SourceError` unless every topic exists (looked up once per topic)."""
        unknown = topics - self._known
        if not unknown:
            return
        have = existing_topics(self.settings, self._reader())
        missing = sorted(unknown - have)
        if missing:
            raise SourceError(
                f"Kafka topic(s) {', '.join(missing)} do not exist at "
                f"{self.settings.kafka.bootstrap_servers}"
            )
        self._known |= unknown

    def _reader(self) -> Any:
        from confluent_kafka import Consumer

        if self._consumer is None:
            self._consumer = Consumer(
                client_config(
                    self.settings,
                    **{
                        # Reads by position only: it joins no group and commits nothing.
                        "group.id": "ackfold-replay",
                        "enable.auto.commit": False,
                        "enable.auto.offset.store": False,
                        "auto.offset.reset": "error",
                        "fetch.wait.max.ms": 10,
                        # What Spark's Kafka source reads (its default): every record, and
                        # watermarks up to the true end of the partition.
                        "isolation.level": "read_uncommitted",
                    },
                )
            )
        return self._consumer

    def _writer(self) -> Any:
        from confluent_kafka import Producer

        if self._producer is None:
            timeout_ms = int(timeout_seconds(self.settings) * 1000)
            self._producer = Producer(
                client_config(
                    self.settings,
                    **{
                        # Retries inside the timeout never write a record twice.
                        "enable.idempotence": True,
                        "acks": "all",
                        "message.timeout.ms": timeout_ms,
                        # A call's records go out in a few large batches per partition
                        # (its flush sends what lingers at once); idempotence keeps at
                        # most 5 requests in flight, in order.
                        "linger.ms": 10,
                        "batch.num.messages": 10_000,
                        "batch.size": 4 * 1024 * 1024,
                    },
                )
            )
        return self._producer
