"""A Kafka record as a replay sees it: where it is (`Position`, what
`roots.source_position` holds), what was re-read there (`Record`), and the headers it is
produced again with (`replay_headers`). `ackfold.sources.kafka` reads and produces them.
"""

from __future__ import annotations

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
        topic, _, rest = text.rpartition(":")
        topic, _, partition = topic.rpartition(":")
        try:
            position = cls(topic, int(partition), int(rest))
        except ValueError:
            position = cls("", -1, -1)
        if not position.topic or position.partition < 0 or position.offset < 0:
            raise ValueError(f"{text!r} is not a Kafka position topic:partition:offset")
        return position

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}:{self.offset}"


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
