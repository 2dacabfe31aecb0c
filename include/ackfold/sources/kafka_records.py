"""A Kafka record as ackfold names it: which record it is (`message_id`, what
`roots.source_message_id` holds), where it is (`Position`, what `roots.source_position`
holds), what a replay re-read there (`Record`), and the headers it is produced again with
(`replay_headers`). `ackfold.sources.kafka` reads and produces them.

A record's message id is `<partition>:<offset>@<topic id>`: the topic's id (Kafka's topic
UUID) tells a topic apart from one deleted and created again under the same name, whose
offsets start over. Its root id derives from `kafka:<topic>:<message id>`, so those
records never share a root id. Roots registered before topic ids were kept (issue 21)
have `<partition>:<offset>`: `docs/sources.md` says what that means for an upgrade.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

from ackfold.sources.base import (
    ATTEMPT,
    DEAD_LAST_STAGE,
    DEAD_REASON,
    DEAD_ROOT_ID,
    ORIGIN_ROOT_ID,
    Outbound,
)

# Headers a replay sets; a re-read record's own values of them are replaced.
_OURS: Final = frozenset({ORIGIN_ROOT_ID, ATTEMPT, DEAD_ROOT_ID, DEAD_REASON, DEAD_LAST_STAGE})

Headers = list[tuple[str, bytes]]


def message_id(topic_id: str, partition: int, offset: int) -> str:
    """The `roots.source_message_id` of a record: `<partition>:<offset>@<topic id>`.

    Example:
        >>> message_id("q1vWc2bBRzSZ3JYBsmkj2A", 0, 42)
        '0:42@q1vWc2bBRzSZ3JYBsmkj2A'
    """
    return f"{partition}:{offset}@{topic_id}"


def topic_id_of(source_message_id: str | None) -> str | None:
    """The topic id in a record's message id; None for the `<partition>:<offset>` of roots
    registered before topic ids, and for anything else that is not a message id (`@` is
    not allowed in a topic name: no position or name is taken for an id).

    Example:
        >>> topic_id_of("0:42@q1vWc2bBRzSZ3JYBsmkj2A"), topic_id_of("0:42")
        ('q1vWc2bBRzSZ3JYBsmkj2A', None)
    """
    record, at, topic_id = (source_message_id or "").rpartition("@")
    partition, _, offset = record.partition(":")
    if not at or not topic_id or not (partition.isdigit() and offset.isdigit()):
        return None
    return topic_id


@dataclass(frozen=True, order=True)
class Position:
    """Where a record is: `topic:partition:offset`, as `roots.source_position` holds it.

    Example:
        >>> Position.parse("orders:3:1042")
        Position(topic='orders', partition=3, offset=1042)
        >>> str(Position("orders", 3, 1042))
        'orders:3:1042'
    """

    topic: str
    partition: int
    offset: int

    @classmethod
    def parse(cls, text: str) -> Position:
        return _parse(text)

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}:{self.offset}"


@functools.lru_cache(maxsize=1 << 16)
def _parse(text: str) -> Position:
    """`Position.parse`, once per text: a replay parses each root's position several
    times (plan, order, re-read, produce), and positions are immutable."""
    topic, _, rest = text.rpartition(":")
    topic, _, partition = topic.rpartition(":")
    try:
        position = Position(topic, int(partition), int(rest))
    except ValueError:
        position = Position("", -1, -1)
    if not position.topic or position.partition < 0 or position.offset < 0:
        raise ValueError(f"{text!r} is not a Kafka position topic:partition:offset")
    return position


@dataclass(frozen=True)
class Record:
    """A record re-read at its position: what a replay produces again."""

    key: bytes | None
    value: bytes | None
    headers: Headers


def replay_headers(original: Headers, message: Outbound) -> Headers:
    """The record's own headers, then the new attempt's (and a dead letter's reason)."""
    kept = [(name, value) for name, value in original if name not in _OURS]
    ours = {ORIGIN_ROOT_ID: str(message.origin_root_id), ATTEMPT: str(message.attempt)}
    ours.update(message.attributes)
    return kept + [(name, text.encode("utf-8")) for name, text in ours.items()]
