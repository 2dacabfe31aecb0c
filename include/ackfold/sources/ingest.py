"""Ingestion from a pull source (SQS) into the ledger: receive, register, then delete.

Spark has no SQS source, so the spout of an SQS app is this loop, in the app's driver:

1. receive up to `sqs.max_messages_per_batch` messages (long poll for the first, batches
   of 10, within a quarter of the visibility timeout);
2. register them: one `roots` row each (with the payload, so a replay can resend it) and
   its `init` event, both committed to Delta: in delta-rs (`Tracker.spout` +
   `LedgerWriter.append`) when the warehouse is a directory of this machine and the
   session is the driver's own, else in Spark (`StageTracker.spout` + `write_batch`);
3. only then delete them from the queue (invariant 6).

A crash before 3 loses nothing: SQS delivers the messages again after their visibility
timeout, and they register under the same root ids. The app's stages then read the
registered roots as a Delta stream (`Ingester.stream`), which Spark replays exactly from
its checkpoint. Why not a Python streaming data source: docs/sources.md ("Why ingestion is a
loop, not a Spark source").

Both ways write the same rows (ids are derived, `tests/spark/test_tracking.py`). The
driver holds the batch's messages already, so delta-rs commits them without a Spark job:
about 40 ms for a batch of 1,000 against about 1 s for Spark's two appends
(docs/decisions/lean-commits.md). Through Spark Connect the client may not see the
server's files, and with an object store delta-rs would need its own credentials and
commit coordination, so those go through Spark.

Example (the driver of an app whose first stage is `split`):
    >>> ingester = Ingester(spark, settings, "wordcount", SqsQueue(settings, "in"),
    ...                     to=["split"])                               # doctest: +SKIP
    >>> query = ingester.stream().writeStream.foreachBatch(split_batch)...start()
    >>> ingester.run(stop=stop_event)                                   # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ackfold.config import Settings
from ackfold.ledger.commits.driver_writers import driver_writer
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.ledger.setup.create import create_tables
from ackfold.sources.base import PullSource, Received, SourceError
from ackfold.spark.frames import local_frame
from ackfold.track.stage import StageTracker
from ackfold.track.tracker import Tracker

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("ackfold.ingest")

SPOUT_STAGE = "spout"
_SCHEMA = "message_id STRING, body STRING, attempt INT, origin_root_id BIGINT"

Hook = Callable[[Sequence[Received]], None]


@dataclass
class IngestStats:
    """What a run of the loop did, for its log lines and its caller."""

    batches: int = 0
    received: int = 0
    registered: int = 0
    # Copies of a message, or of one replay attempt, received in one batch: registered
    # once. (Copies in different batches are registered again, under the same root id.)
    duplicates: int = 0
    delete_refused: int = 0
    ignored_attributes: int = 0
    source_errors: int = 0
    seconds: float = 0.0
    last_error: str | None = field(default=None, repr=False)


class Ingester:
    """The receive→register→delete loop of one app on one pull source.

    `to` names the app's first stages, as `StageTracker.spout` takes it. `on_received`
    and `on_registered` are called with each batch right after the receive and right
    after the commit: a place for metrics, or for a test to kill the process there.
    """

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        app: str,
        source: PullSource,
        *,
        to: Sequence[str] | None = None,
        on_received: Hook | None = None,
        on_registered: Hook | None = None,
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.source = source
        self.to = tuple(to) if to is not None else None
        self.ledger = Ledger(settings.table_root)
        self.tracker = StageTracker(app, SPOUT_STAGE, ledger=self.ledger)
        self.app = self.tracker.app
        self.on_received = on_received
        self.on_registered = on_registered
        self.stats = IngestStats()
        sqs = settings.sqs
        self.max_messages = sqs.max_messages_per_batch
        self.wait_seconds = int(sqs.wait_time.total_seconds())
        self.visibility = sqs.visibility_timeout.total_seconds()
        self.writer = driver_writer(spark, self.ledger)

    def stream(self, *, max_files_per_trigger: int | None = None) -> DataFrame:
        """The registered roots of this app and queue as a streaming DataFrame of tuples
        (`roots` columns, among them `payload`, plus `_ackfold`).

        `max_files_per_trigger` caps a micro-batch at that many of the `roots` table's
        files (Delta's `maxFilesPerTrigger`; its default is 1,000). A batch registered in
        delta-rs is one file, so 1 makes each micro-batch one ingest batch."""
        from pyspark.sql import functions as F

        create_tables(self.spark, self.ledger, (ACK_EVENTS, ROOTS))
        reader = self.spark.readStream.format("delta")
        if max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
        roots = reader.load(self.ledger.path(ROOTS))
        mine = roots.where(
            (F.col("app") == self.app)
            & (F.col("source") == self.source.source)
            & (F.col("source_queue") == self.source.queue)
        )
        return self.tracker.registered(mine, to=self.to)

    def poll(self) -> int:
        """One batch: receive, register, delete. Returns the number of messages received."""
        started = time.monotonic()
        messages = self._receive(deadline=started + self.visibility / 4)
        if not messages:
            return 0
        if self.on_received:
            self.on_received(messages)
        self._register(messages)
        if self.on_registered:
            self.on_registered(messages)
        refused = self.source.acknowledge(messages)
        elapsed = time.monotonic() - started
        self.stats.batches += 1
        self.stats.received += len(messages)
        self.stats.registered += len(messages) - self._duplicates(messages)
        self.stats.delete_refused += refused
        log.info(
            "ingest %s: batch %d, %d messages from %s registered and deleted in %.1fs",
            self.app, self.stats.batches, len(messages), self.source.queue, elapsed,
        )  # fmt: skip
        if elapsed > self.visibility / 2:
            log.warning(
                "ingest %s: a batch took %.0fs, over half the visibility timeout (%.0fs): "
                "raise sqs.visibility_timeout or lower sqs.max_messages_per_batch, or SQS "
                "will deliver messages again while they are being registered",
                self.app, elapsed, self.visibility,
            )  # fmt: skip
        return len(messages)

    def run(
        self,
        stop: threading.Event | None = None,
        *,
        until_idle: float | None = None,
        max_batches: int | None = None,
    ) -> IngestStats:
        """Poll until `stop` is set, until `until_idle` seconds pass without a message, or
        after `max_batches`. An unreachable queue is retried with backoff, never fatal."""
        stop = stop or threading.Event()
        started = idle_since = time.monotonic()
        backoff = 1.0
        while not stop.is_set():
            if max_batches is not None and self.stats.batches >= max_batches:
                break
            try:
                got = self.poll()
                backoff = 1.0
            except SourceError as exc:
                self.stats.source_errors += 1
                self.stats.last_error = str(exc)
                log.warning("ingest %s: %s; retrying in %.0fs", self.app, exc, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            now = time.monotonic()
            if got:
                idle_since = now
            elif until_idle is not None and now - idle_since >= until_idle:
                break
        self.stats.seconds = time.monotonic() - started
        return self.stats

    def _receive(self, deadline: float) -> list[Received]:
        """Fill a batch: a long poll for the first messages, then short polls while the
        queue keeps giving full batches of 10."""
        batch = self.source.receive(self.max_messages, self.wait_seconds)
        last = len(batch)
        while last >= 10 and len(batch) < self.max_messages and time.monotonic() < deadline:
            more = self.source.receive(self.max_messages - len(batch), 0)
            batch.extend(more)
            last = len(more)
        return batch

    def _duplicates(self, messages: Sequence[Received]) -> int:
        keys = Counter(
            (m.origin_root_id, m.attempt) if m.attempt > 1 else m.message_id for m in messages
        )
        duplicates = sum(n - 1 for n in keys.values())
        if duplicates:
            self.stats.duplicates += duplicates
            log.info("ingest %s: %d duplicate deliveries, registered once", self.app, duplicates)
        return duplicates

    def _register(self, messages: Sequence[Received]) -> None:
        for message in messages:
            if message.problem:
                self.stats.ignored_attributes += 1
                log.warning(
                    "ingest %s: message %s %s; registered as a new message",
                    self.app, message.message_id, message.problem,
                )  # fmt: skip
        if self.writer is not None:
            # The scheme the ledger's roots table records (text in a contract-v1 one).
            tracker = Tracker(self.app, id_scheme=self.tracker.roots_scheme(self.spark))
            for m in messages:
                tracker.spout(
                    m.message_id,
                    stage=SPOUT_STAGE,
                    source=self.source.source,
                    source_queue=self.source.queue,
                    attempt=m.attempt,
                    origin_root_id=m.origin_root_id,
                    payload=m.body,
                    to=self.to,
                )
            self.writer.append(tracker.drain_roots(), tracker.drain())
            return
        rows = [(m.message_id, m.body, m.attempt, m.origin_root_id) for m in messages]
        frame = local_frame(self.spark, rows, _SCHEMA)
        out = self.tracker.spout(
            frame,
            message_id="message_id",
            source=self.source.source,
            source_queue=self.source.queue,
            attempt="attempt",
            origin_root_id="origin_root_id",
            payload="body",
            to=self.to,
        )
        self.tracker.write_batch(None, roots=out.roots, events=[out.events])
