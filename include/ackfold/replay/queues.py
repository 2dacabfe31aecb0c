"""Where a replay sends: each root's source queue (or the app's retry topic), and its
dead-letter queue; one client per queue and run, released by `SourceQueues.close`."""

from __future__ import annotations

from typing import Final

from ackfold.config import Settings
from ackfold.sources.base import SourceQueue

# Sources a replay can send to.
SENDERS: Final = ("sqs", "kafka")


def source_queue(settings: Settings, source: str, queue: str, app: str) -> SourceQueue:
    """Where a replay of `app`'s root from `queue` goes, with the app's dead-letter queue
    (and, on Kafka, its retry topic: a root read from there goes back there)."""
    overrides = settings.apps.get(app)
    dead_letters = overrides.dead_letter_queue if overrides else None
    if source == "sqs":
        from ackfold.sources.sqs import SqsQueue

        return SqsQueue(settings, queue, dead_letter_queue=dead_letters)
    if source == "kafka":
        from ackfold.sources.kafka import KafkaTopic

        retry = overrides.retry_queue if overrides else None
        # The source topic names the dead-letter topic, whichever topic the root came from.
        topic = (overrides.source_queue if overrides else None) if queue == retry else queue
        return KafkaTopic(
            settings, topic or queue, dead_letter_queue=dead_letters, retry_topic=retry
        )
    raise ValueError(f"source {source!r} cannot be replayed")


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
