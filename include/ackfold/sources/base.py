"""What every source queue shares: the messages in and out, and the queue a replay sends to.

`SourceQueue` is the part every source shares: republishing a replay and parking a dead
letter. `PullSource` adds receive and acknowledge, for queues that Spark cannot read (SQS):
a source that Spark reads itself (Kafka) acknowledges through its checkpoint instead.

Message attributes (SQS) or headers (Kafka) of a replayed message carry `origin_root_id`
and `attempt`: the ingesting spout derives the new root's id from them, never from the
new message id, so a message sent twice is still one root (invariant 4).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from ackfold.errors import AckfoldError

ORIGIN_ROOT_ID: Final = "origin_root_id"
ATTEMPT: Final = "attempt"
# Set on dead letters only: which root died, why, and how far it got.
DEAD_ROOT_ID: Final = "ackfold_root_id"
DEAD_REASON: Final = "ackfold_reason"
DEAD_LAST_STAGE: Final = "ackfold_last_stage"
# The dead-letter reason of a root whose message the source deleted (Kafka retention)
# before a replay could re-read it: a message lost, which the quality checks report.
EXPIRED: Final = "source record expired"
# How the dead-letter reason of a root whose source has no sender begins
# (`ackfold.replay.senders.no_sender_reason`): nothing could replay it, and the quality
# checks count it as settled, saying why.
NO_SENDER: Final = "no sender for source "


class SourceError(AckfoldError, RuntimeError):
    """The source queue cannot be reached or refused a request. The message says which."""


@dataclass(frozen=True)
class Unreadable:
    """Why a replay cannot re-read a root's message at its `source_position`.

    `final`: no run ever can (a position that does not parse): the root is dead-lettered
    with `reason`. Otherwise not now (its topic does not exist): the root is skipped this
    run, and reported, and the rest of the plan goes ahead.
    """

    reason: str
    final: bool


@dataclass(frozen=True)
class Received:
    """One message received from a pull source, not yet acknowledged.

    `attempt` and `origin_root_id` come from the message's attributes (a replay); a
    message without them is attempt 1. `problem` says why attributes were ignored.
    """

    message_id: str
    body: str
    handle: Any
    attempt: int = 1
    origin_root_id: int | None = None
    problem: str | None = None


@dataclass(frozen=True)
class Outbound:
    """One message a replay sends: the payload of `root_id`, as attempt `attempt`.

    `body` is the stored payload; a source that re-reads (Kafka) sends the record at
    `position` instead, and `body` only if that record is gone."""

    root_id: int
    origin_root_id: int
    attempt: int
    body: str | None
    # Extra attributes (dead letters: reason, last stage).
    attributes: Mapping[str, str] = field(default_factory=dict)
    position: str | None = None
    # The root id the new attempt registers under (`ackfold.ledger.schema.ids.root_id` of the
    # origin and attempt): a sender that names what it sends by it needs no hash.
    new_root_id: int | None = None

    @property
    def dedup_id(self) -> str:
        """The same for every resend of one attempt: FIFO queues drop the copies."""
        return f"{self.origin_root_id}-{self.attempt}"


@dataclass(frozen=True)
class Sent:
    """What happened to one `Outbound`: its new message id, or the error that stopped it."""

    root_id: int
    message_id: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def gone(self) -> bool:
        """Failed because the source no longer holds the message: sending it again cannot
        help, and the next replay plan dead-letters it."""
        return self.error is not None and self.error.startswith(EXPIRED)


def dead_letter_attributes(root_id: int, reason: str, last_stage: str | None) -> dict[str, str]:
    """The attributes that tell a reader of a dead-letter queue what died, why, and where."""
    return {DEAD_ROOT_ID: str(root_id), DEAD_REASON: reason, DEAD_LAST_STAGE: last_stage or "-"}


class SourceQueue(ABC):
    """A queue a replay can send to: its source queue and its dead-letter queue."""

    source: ClassVar[str]
    # Whether a replay re-reads the message at its position (Kafka) rather than sending
    # the payload stored in `roots` (SQS).
    rereads: ClassVar[bool] = False
    # Messages per `republish` / `dead_letter` call (and per pause of a rate-limited run).
    batch_size: ClassVar[int] = 10
    # How many such calls a replay may have under way at once (from as many threads): a
    # queue whose batches are small round trips (SQS) keeps its server busy this way.
    parallel: ClassVar[int] = 1

    def __init__(self, queue: str) -> None:
        self.queue = queue

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.queue!r})"

    @abstractmethod
    def republish(self, messages: Sequence[Outbound]) -> list[Sent]:
        """Send each message back to this queue as a new attempt. Never raises for one
        message: a failure is that message's `Sent.error`."""

    @abstractmethod
    def dead_letter(self, messages: Sequence[Outbound]) -> list[Sent]:
        """Send each message to this queue's dead-letter queue, as `republish` does."""

    @property
    @abstractmethod
    def dead_letter_queue(self) -> str:
        """The name of the dead-letter queue (may need the server to find out)."""

    @property
    def replay_queue(self) -> str:
        """Where `republish` sends: the queue itself, unless the source has a retry queue."""
        return self.queue

    def close(self) -> None:
        """Release the clients this queue holds (a Kafka producer and consumer)."""
        return None

    def check_dead_letter_queue(self, app: str) -> None:
        """Raise `SourceError` if the dead-letter queue cannot take `app`'s dead letters
        (it does not exist, or this host may not reach it), naming the queue and the fix:
        a replay checks before it logs or sends anything. By default, nothing to check."""
        return None

    def expired(self, positions: Iterable[str]) -> set[str]:
        """The positions whose messages the source no longer holds (a source that
        re-reads), of positions `unreadable` passed. `SourceError` if the source cannot
        tell."""
        return set()

    def unreadable(
        self, positions: Iterable[str], message_ids: Mapping[str, str | None] | None = None
    ) -> dict[str, Unreadable]:
        """The positions a replay cannot re-read at all, with why (a source that
        re-reads); `message_ids` maps a position to its root's `source_message_id`, which
        may say more than the position (Kafka: the topic's id). `SourceError` if the
        source cannot tell."""
        return {}


class PullSource(SourceQueue):
    """A source that ackfold reads itself, for want of a Spark source (SQS)."""

    @abstractmethod
    def receive(self, max_messages: int, wait_seconds: int) -> list[Received]:
        """Up to `max_messages` messages, waiting up to `wait_seconds` for the first."""

    @abstractmethod
    def acknowledge(self, messages: Sequence[Received]) -> int:
        """Remove messages whose roots are registered; returns how many the queue refused
        (they will be delivered again, and registered again under the same root id)."""
