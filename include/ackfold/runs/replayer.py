"""The replay engine: failed and timed-out roots go back to their source queues as new
attempts; roots out of attempts go to `dead_letters` and their dead-letter queue.

A run has two halves:

- `Replayer.plan(request)` (`ackfold.replay.planner`) selects roots from `root_state` (by
  policy for an automatic run, by the user's filters for a manual one), joins their
  payloads from `roots` and what `replay_log` already says about them, and decides per
  root: send a new attempt, dead-letter it, resend what an earlier run planned but never
  marked sent, finish the bookkeeping of what it sent, or skip it (with the reason).
- `Replayer.execute(plan)` appends a `planned` row per send to `replay_log` BEFORE
  sending anything, then sends chunk by chunk at the requested rate, in the queues' batch
  calls (`SourceQueue.batch_size`, several at once where `SourceQueue.parallel` says
  so), and marks each sent
  chunk with a `sent` row (with the new message id) or a `failed` row (with the error) per
  message, appended while the next chunks are sent (`ackfold.replay.marks`). At the end
  it sets `root_state` to `replayed` or `dead_lettered` and records dead letters and
  redrives (MERGEs, once per run; `ackfold.replay.bookkeeping`).

So a re-run sends exactly what was not yet sent (invariant 4). A crash between a send and
its mark resends what was not marked yet (at most the chunk being sent and the chunks
waiting for their mark), once, and the summary counts it (`resent`); the
copies share the new root id (derived from the origin and the attempt) and, on FIFO
queues, the deduplication id. An unreachable queue is retried with backoff; what still
fails stays in the log as unsent, and the run says so.

Either half runs on any engine (`ackfold.engines.Engine`: its `replay_planner` reads the
tables, its `replay_books` commits the bookkeeping); `ackfold.runs.replay` holds the one
run function that the DAGs, the CLI and the demo call.

Example:
    >>> replayer = Replayer(None, settings)                      # doctest: +SKIP
    >>> plan = replayer.plan(ReplayRequest(app="wordcount"))     # doctest: +SKIP
    >>> replayer.execute(plan).sent                              # doctest: +SKIP
    12
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import Settings
from ackfold.engines import Engine, by_session, resolve
from ackfold.errors import AckfoldError
from ackfold.ledger.commits.fence import active, held
from ackfold.ledger.commits.lease import ledger_turn
from ackfold.ledger.schema.tables import Ledger
from ackfold.replay.bookkeeping import PLANNED, now_wall
from ackfold.replay.marks import Marker
from ackfold.replay.planner import DEAD_LETTER, NEW, REPLAY, SENT, UNSENT, Plan, Planned
from ackfold.replay.queues import SourceQueues
from ackfold.replay.request import ReplayRequest
from ackfold.sources.base import Sent
from ackfold.sources.kafka_records import Position

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("ackfold.replay")


class ReplayError(AckfoldError, RuntimeError):
    """A replay could not send everything it planned; the log says what is left."""


@dataclass
class ReplaySummary:
    """What a run did; `as_dict()` is what the CLI prints with --json and the DAG logs."""

    replay_id: str
    dry_run: bool
    selected: int
    planned: int
    sent: int = 0
    dead_lettered: int = 0
    resent: int = 0
    already_sent: int = 0
    not_sent: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    last_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


Progress = Callable[[int, int], None]
AfterSend = Callable[[list[Sent]], None]


class Replayer:
    """Plans and executes replay runs over the ledger under `settings.table_root`, on
    `engine` (an `ackfold.engines.Engine`, or a registered engine's name). By default,
    Spark if a session `spark` is given (or what starts one), else the embedded engine
    (`ackfold.engines.by_session`); `ackfold.runs.replay.run_replay` passes the engine
    `engine.kind` chooses.

    `run_replay` runs `plan` and `execute` under the ledger's turn, one writer of
    `root_state` at a time, from the plan to the last status; `execute` called alone takes
    the turn for itself."""

    def __init__(
        self,
        spark: SparkSession | Callable[[], SparkSession] | None,
        settings: Settings,
        *,
        now: datetime | None = None,
        engine: Engine | str | None = None,
    ) -> None:
        self.settings = settings
        self.ledger = Ledger(settings.table_root)
        self.now = (now or datetime.now(UTC)).astimezone(UTC)
        self.engine = resolve(engine or by_session(spark), settings, spark=spark)
        self._owns_engine = self.engine is not engine
        self._queues = SourceQueues(settings)
        self._pool: ThreadPoolExecutor | None = None
        self._books = self.engine.replay_books(self.ledger)
        self._planner = self.engine.replay_planner(self._queues, now=self.now)

    def plan(self, request: ReplayRequest) -> Plan:
        """Select and decide; writes nothing. Raises `UnknownRoots` for unknown root ids."""
        return self._planner.plan(request)

    def execute(
        self,
        plan: Plan,
        *,
        progress: Progress | None = None,
        after_send: AfterSend | None = None,
    ) -> ReplaySummary:
        """Log, send, mark. `after_send` runs after each chunk is sent, before its mark.

        Under the ledger's turn: the caller's (`run_replay`, which claims the tables and
        checks its plan first) or a fence this thread holds, else one taken here: its
        sends and commits are a lease holder's (invariant 19)."""
        if active(self.settings.table_root) is not None:
            return self._execute(plan, progress=progress, after_send=after_send)
        with ledger_turn(self.settings, "a replay", say=log.info):
            return self._execute(plan, progress=progress, after_send=after_send)

    def _execute(
        self, plan: Plan, *, progress: Progress | None, after_send: AfterSend | None
    ) -> ReplaySummary:
        started = time.monotonic()
        request = plan.request
        summary = ReplaySummary(
            plan.replay_id, request.dry_run, plan.selected, len(plan.sends), skipped=plan.skipped
        )
        new = [p for p in plan.sends if p.state == NEW]
        if request.dry_run:
            self._books.append_log(plan, new, PLANNED, dry_run=True)
            summary.seconds = time.monotonic() - started
            return summary
        self._check_dead_letter_queues(plan.to_send)
        plan.logged_at = self._books.append_log(plan, new, PLANNED)
        done = [p for p in plan.sends if p.state == SENT]
        summary.already_sent = len(done)
        pending = sorted(plan.to_send, key=_send_order)
        chunk = self.settings.replay.chunk
        pacer = _Pacer(request.rate or self._rate(request))
        delivered: list[Planned] = list(done)
        results: dict[int, Sent] = {}
        # The marks keep a re-run from sending again: appended while the next chunks are
        # sent, each append covering the chunks sent during the one before.
        with Marker(self._books, plan) as marker:
            for start in range(0, len(pending), chunk):
                batch = pending[start : start + chunk]
                results.update(self._send_with_retries(batch, pacer))
                if after_send:
                    after_send([results[p.root_id] for p in batch])
                marker.add(batch, results)
                ok = [p for p in batch if results[p.root_id].ok]
                delivered.extend(ok)
                summary.sent += sum(1 for p in ok if p.action == REPLAY)
                summary.dead_lettered += sum(1 for p in ok if p.action == DEAD_LETTER)
                summary.resent += sum(1 for p in ok if p.state == UNSENT)
                failed = [results[p.root_id] for p in batch if not results[p.root_id].ok]
                gone = [sent for sent in failed if sent.gone]
                if progress:
                    progress(start + len(batch), len(pending))
                if gone:
                    # Each fails alone (the next plan dead-letters it); the run goes on.
                    summary.last_error = gone[-1].error
                    summary.not_sent += len(gone)
                if len(gone) < len(failed):
                    summary.last_error = failed[-1].error
                    summary.not_sent += len(pending) - start - len(ok) - len(gone)
                    break  # the queue is down or refusing: the rest stays planned in the log
        # Statuses once per run: a crash before this leaves marked sends, which the next
        # run's plan finds (state SENT) and finishes without sending them again.
        self._books.settle(delivered, results)
        summary.seconds = time.monotonic() - started
        log.info("replay %s: %s", plan.replay_id, json.dumps(summary.as_dict(), default=str))
        return summary

    def _check_dead_letter_queues(self, sends: Sequence[Planned]) -> None:
        """Before anything is logged or sent: each dead-letter queue this run sends to can
        take its letters (`SourceQueue.check_dead_letter_queue`), else `SourceError` naming
        the queue and the fix. A missing one would otherwise fail mid-run, after the
        replays before it went out."""
        targets = {(p.source, p.source_queue, p.app) for p in sends if p.action == DEAD_LETTER}
        for source, queue, app in sorted(targets):
            self._queues.get(source, queue, app).check_dead_letter_queue(app)

    def _rate(self, request: ReplayRequest) -> float:
        if request.app:
            return self.settings.app(request.app).replay_rate
        return self.settings.defaults.replay_rate

    def _send_with_retries(self, batch: Sequence[Planned], pacer: _Pacer) -> dict[int, Sent]:
        results: dict[int, Sent] = {}
        todo = list(batch)
        delay = self.settings.replay.send_backoff.total_seconds()
        for round_ in range(self.settings.replay.send_attempts):
            # A run that lost the lease sends nothing more (invariant 19): the lease is
            # read before each chunk's sends (no commit fences a queue).
            self._guard(read=True)
            if round_:
                log.warning(
                    "replay: %d message(s) not sent (%s); retrying in %.0fs",
                    len(todo), results[todo[0].root_id].error, delay,
                )  # fmt: skip
                time.sleep(delay)
                delay *= 2
            for sent in self._send(todo, pacer):
                results[sent.root_id] = sent
            # A message the source no longer holds cannot be sent by trying again.
            todo = [p for p in todo if not results[p.root_id].ok and not results[p.root_id].gone]
            if not todo:
                break
        return results

    def _send(self, batch: Sequence[Planned], pacer: _Pacer) -> list[Sent]:
        """Send `batch` in the queues' batches (`SourceQueue.batch_size`), paced; a queue
        that takes several batches at once (`SourceQueue.parallel`: SQS) gets them from a
        few threads, each call still one `SendMessageBatch`."""
        calls: list[Future[list[Sent]]] = []
        groups: dict[tuple[str, str, str, str], list[Planned]] = {}
        for planned in batch:
            key = (planned.source, planned.source_queue, planned.app, planned.action)
            groups.setdefault(key, []).append(planned)
        for (source, queue_name, app, action), members in groups.items():
            queue = self._queues.get(source, queue_name, app)
            send = queue.republish if action == REPLAY else queue.dead_letter
            for start in range(0, len(members), queue.batch_size):
                group = members[start : start + queue.batch_size]
                pacer.wait(len(group))
                self._guard(read=False)  # lost or expired: no read, each batch
                outbound = [p.outbound() for p in group]
                if queue.parallel > 1:
                    calls.append(self._threads(queue.parallel).submit(send, outbound))
                else:
                    done: Future[list[Sent]] = Future()
                    done.set_result(send(outbound))
                    calls.append(done)
        return [sent for call in calls for sent in call.result()]

    def _guard(self, *, read: bool) -> None:
        """Raise `LeaseLost` if this run no longer holds the ledger's lease (`read`: as the
        lease says now; else as this run knows it), `Unfenced` outside a turn."""
        fence = held(self.settings.table_root, "a replay's send")
        fence.check("the rest of this replay's sends", read=read)

    def _threads(self, count: int) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(count, thread_name_prefix="ackfold-replay-send")
        return self._pool

    def close(self) -> None:
        """Release the source queues' clients, the send threads and the engine's."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._queues.close()
        self._planner.close()
        if self._owns_engine:
            self.engine.close()

    def now_wall(self) -> datetime:
        """Log times are wall-clock times (the run's `now` may be set for timeouts)."""
        return now_wall()


def _send_order(planned: Planned) -> tuple[str, str, str, int, int]:
    """Sends grouped by queue, and the records of a source that re-reads (Kafka) in log
    order: each chunk then re-reads runs of nearby offsets, instead of seeking across the
    whole topic for roots the plan ordered by time."""
    try:
        at = Position.parse(planned.source_position) if planned.source_position else None
    except ValueError:
        at = None
    if at is None:
        return (planned.source, planned.source_queue, "", -1, -1)
    return (planned.source, planned.source_queue, at.topic, at.partition, at.offset)


class _Pacer:
    """Keeps sends at or under `rate` messages per second, in bursts of one batch.

    A wait shorter than `MIN_SLEEP` is not slept but carried over to the next batch:
    at high rates a sleep of a fraction of a millisecond costs more than the wait asked
    (thousands of them took seconds of a 10,000-message run), while the average rate
    stays exact."""

    MIN_SLEEP: Final = 0.005

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.next_at = time.monotonic()

    def wait(self, messages: int) -> None:
        now = time.monotonic()
        delay = self.next_at - now
        if delay >= self.MIN_SLEEP:
            time.sleep(delay)
            now = time.monotonic()
        self.next_at = max(self.next_at, now) + messages * self.interval


def unsent_error(summary: ReplaySummary) -> ReplayError:
    """What to tell the user when a run left messages unsent."""
    return ReplayError(
        f"{summary.not_sent} message(s) not sent: {summary.last_error}. They stay in "
        "replay_log as planned, not sent; run `ackfold replay` again to send exactly those."
    )
