"""The demo's input: numbered sentences from a bundled public-domain text, some poisoned.

Each message body is JSON, `{"seq": 17, "text": "..."}`: `seq` is the message's number in
the feed, which the seeded faults hash (SQS message ids differ from run to run). A poison
message is cut off mid-JSON, so no attempt can ever parse it.

Example:
    >>> from ackfold.config import Settings
    >>> from ackfold.config.demo import FaultSettings
    >>> feed = Feed.build(5, FaultSettings(seed=1, poison=1, stuck=1))
    >>> len(feed.messages), len(feed.poison), len(feed.dead_letters)
    (5, 1, 2)
    >>> tokens('"Oh! single, my dear."')
    ['oh', 'single', 'my', 'dear']
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ackfold.config import Settings
from ackfold.config.demo import FaultSettings

# Spark splits the same way: lower case, then runs of letters and apostrophes.
WORD_PATTERN = "[a-z']+"
NOT_WORD_PATTERN = "[^a-z']+"


def sentences() -> list[str]:
    text = resources.files("ackfold.demo").joinpath("sentences.txt").read_text("utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def tokens(text: str) -> list[str]:
    return re.findall(WORD_PATTERN, text.lower())


@dataclass(frozen=True)
class Message:
    seq: int
    body: str
    text: str | None  # None for a poison message


@dataclass(frozen=True)
class Feed:
    messages: tuple[Message, ...]
    stuck: frozenset[int] = frozenset()  # seqs that meet an outage (`FaultSettings.stuck`)

    @classmethod
    def build(cls, count: int, faults: FaultSettings) -> Feed:
        """`count` messages, the text's sentences in order, round and round; `faults.poison`
        of them, chosen by the seed, are poison."""
        lines = sentences()
        chooser = random.Random(faults.seed)  # noqa: S311 - reproducible, not secret
        poison = set(chooser.sample(range(count), min(faults.poison, count)))
        healthy = [seq for seq in range(count) if seq not in poison]
        stuck = frozenset(chooser.sample(healthy, min(faults.stuck, len(healthy))))
        messages = []
        for seq in range(count):
            text = lines[seq % len(lines)]
            if seq in poison:
                messages.append(Message(seq, f'{{"seq": {seq}, "text": ', None))
            else:
                messages.append(Message(seq, json.dumps({"seq": seq, "text": text}), text))
        return cls(tuple(messages), stuck)

    @property
    def poison(self) -> list[int]:
        return [m.seq for m in self.messages if m.text is None]

    @property
    def dead_letters(self) -> list[int]:
        """The seqs the demo must end up dead-lettering: the poison and the stuck ones."""
        return sorted([*self.poison, *self.stuck])

    def true_counts(self) -> Counter[str]:
        """The word counts straight from the input, without the dead letters it expects
        (poison and stuck): what the app counts when every other message completes."""
        return self.counts_of(m.seq for m in self.messages if m.seq not in self.stuck)

    def counts_of(self, seqs: Iterable[int]) -> Counter[str]:
        """The word counts of the messages numbered `seqs` (a poison message has none)."""
        counts: Counter[str] = Counter()
        for seq in seqs:
            text = self.messages[seq].text
            if text is not None:
                counts.update(tokens(text))
        return counts

    def send(
        self, client: Any, url: str, progress: Callable[[int, int], None] | None = None
    ) -> list[str]:
        """Send every message, 10 per SendMessageBatch; returns the SQS ids in feed order."""
        return send_bodies(client, url, [m.body for m in self.messages], progress)

    def publish(
        self, settings: Settings, topic: str, progress: Callable[[int, int], None] | None = None
    ) -> list[str]:
        """Produce every message to Kafka; returns their message ids in feed order."""
        return publish_bodies(settings, topic, [m.body for m in self.messages], progress)


def publish_bodies(
    settings: Settings,
    topic: str,
    bodies: Iterable[str],
    progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Produce `bodies` to Kafka `topic` (idempotent producer, acks from all replicas);
    returns their message ids (`partition:offset@topic-id`), in order: the ids roots
    register (`ackfold.sources.kafka_records.message_id`)."""
    from confluent_kafka import Producer

    from ackfold.sources.kafka_client import client_config, topic_ids
    from ackfold.sources.kafka_records import message_id

    bodies = list(bodies)
    topic_id = topic_ids(settings, [topic])[topic]
    producer = Producer(client_config(settings, **{"enable.idempotence": True, "acks": "all"}))
    ids: list[str | None] = [None] * len(bodies)
    errors: list[str] = []

    def delivered(index: int) -> Callable[[Any, Any], None]:
        def report(error: Any, record: Any) -> None:
            if error is not None:
                errors.append(error.str())
            else:
                ids[index] = message_id(topic_id, record.partition(), record.offset())

        return report

    for index, body in enumerate(bodies):
        # Keyed by position in the feed: a sentence's partition is the same on every run.
        producer.produce(topic, body.encode("utf-8"), str(index).encode(),
                         on_delivery=delivered(index))  # fmt: skip
        producer.poll(0)
        if progress is not None and index % 100 == 99:
            progress(index + 1, len(bodies))
    left = producer.flush(settings.kafka.timeout.total_seconds() * 3)
    if left or errors:
        raise RuntimeError(
            f"Kafka at {settings.kafka.bootstrap_servers} took {len(bodies) - left - len(errors)}"
            f" of {len(bodies)} messages for {topic}: {errors[-1] if errors else 'timed out'}"
        )
    if progress is not None:
        progress(len(bodies), len(bodies))
    return [i for i in ids if i is not None]


def send_bodies(
    client: Any,
    url: str,
    bodies: Iterable[str],
    progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Send `bodies` in batches of 10; returns their SQS message ids, in order."""
    bodies = list(bodies)
    ids: list[str] = []
    for first in range(0, len(bodies), 10):
        batch = bodies[first : first + 10]
        entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(batch)]
        response = client.send_message_batch(QueueUrl=url, Entries=entries)
        if response.get("Failed"):
            raise RuntimeError(f"SQS refused messages: {response['Failed']}")
        by_id = {e["Id"]: e["MessageId"] for e in response["Successful"]}
        ids.extend(by_id[str(i)] for i in range(len(batch)))
        if progress is not None:
            progress(len(ids), len(bodies))
    return ids
