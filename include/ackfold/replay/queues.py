"""Where a replay sends: each root's source queue (or the app's retry topic), and its
dead-letter queue; one client per queue and run, released by `SourceQueues.close`.

Each source's queue is made by its sender (`ackfold.replay.senders`): ackfold's own for
`sqs` and `kafka` (`sqs_sender`, `kafka_sender`), any other registered under the entry
point group `ackfold.senders`. A source with none gets an `Unsendable` queue, which the
planner dead-letters at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ackfold.config import Settings
from ackfold.replay.senders import find_sender, no_sender_reason
from ackfold.sources.base import Outbound, Sent, SourceQueue

# The `target` in `replay_log` and `dead_letter_queue` in `dead_letters` of a root whose
# source has no sender: it goes to no queue.
NO_QUEUE: Final = "-"


def sqs_sender(settings: Settings, queue: str, app: str) -> SourceQueue:
    """The sender of SQS roots: the queue itself, and the app's dead-letter queue."""
    from ackfold.sources.sqs import SqsQueue

    overrides = settings.apps.get(app)
    dead_letters = overrides.dead_letter_queue if overrides else None
    return SqsQueue(settings, queue, dead_letter_queue=dead_letters)


def kafka_sender(settings: Settings, queue: str, app: str) -> SourceQueue:
    """The sender of Kafka roots: the app's retry topic (a root read from there goes back
    there) or the source topic, and the dead-letter topic."""
    from ackfold.sources.kafka import KafkaTopic

    overrides = settings.apps.get(app)
    dead_letters = overrides.dead_letter_queue if overrides else None
    retry = overrides.retry_queue if overrides else None
    # The source topic names the dead-letter topic, whichever topic the root came from.
    topic = (overrides.source_queue if overrides else None) if queue == retry else queue
    return KafkaTopic(settings, topic or queue, dead_letter_queue=dead_letters, retry_topic=retry)


class Unsendable(SourceQueue):
    """The queue of a source with no sender: nothing can be sent to it. A dead letter
    goes to no queue (it is recorded in `dead_letters` only): `dead_letter` delivers it
    with no message id. The planner never plans a replay to it."""

    def __init__(self, source: str, queue: str) -> None:
        super().__init__(queue)
        self.source = source  # type: ignore[misc]  # per instance: whichever source it stands for
        self.reason = no_sender_reason(source)

    def republish(self, messages: Sequence[Outbound]) -> list[Sent]:
        return [Sent(m.root_id, error=self.reason) for m in messages]

    def dead_letter(self, messages: Sequence[Outbound]) -> list[Sent]:
        return [Sent(m.root_id) for m in messages]

    @property
    def dead_letter_queue(self) -> str:
        return NO_QUEUE


def source_queue(settings: Settings, source: str, queue: str, app: str) -> SourceQueue:
    """Where a replay of `app`'s root from `queue` of `source` goes, with its dead-letter
    queue: made by the source's sender, else `Unsendable`."""
    sender = find_sender(source)
    if sender is None:
        return Unsendable(source, queue)
    return sender(settings, queue, app)


class SourceQueues:
    """The source queues of one replay run, each made once, by source, queue and app."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._queues: dict[tuple[str, str, str], SourceQueue] = {}

    def get(self, source: str, queue: str, app: str) -> SourceQueue:
        """The queue a root of `app` read from `queue` of `source` goes back to."""
        key = (source, queue, app)
        if key not in self._queues:
            self._queues[key] = source_queue(self.settings, source, queue, app)
        return self._queues[key]

    def close(self) -> None:
        """Release the queues' clients."""
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()
