"""The replay engine: failed and timed-out roots go back to their source queues as new
attempts; roots out of attempts go to `dead_letters` and their dead-letter queue.

A run has two halves:

- `Replayer.plan(request)` selects roots from `root_state` (by policy for an automatic
  run, by the user's filters for a manual one), joins their payloads from `roots` and
  what `replay_log` already says about them, and decides per root: send a new attempt,
  dead-letter it, resend what an earlier run planned but never marked sent, finish the
  bookkeeping of what it sent, or skip it (with the reason).
- `Replayer.execute(plan)` appends a `planned` row per send to `replay_log` BEFORE
  sending anything, then sends chunk by chunk at the requested rate, and after each chunk
  appends a `sent` row (with the new message id) or a `failed` row (with the error) per
  message. At the end it sets `root_state` to `replayed` or `dead_lettered` and records
  dead letters and redrives (MERGEs, once per run).

So a re-run sends exactly what was not yet sent (invariant 4). A crash between a send and
its mark resends at most that chunk, once, and the summary counts it (`resent`); the
copies share the new root id (derived from the origin and the attempt) and, on FIFO
queues, the deduplication id. An unreachable queue is retried with backoff; what still
fails stays in the log as unsent, and the run says so.

Example:
    >>> replayer = Replayer(spark, settings)                     # doctest: +SKIP
    >>> plan = replayer.plan(ReplayRequest(app="wordcount"))     # doctest: +SKIP
    >>> replayer.execute(plan).sent                              # doctest: +SKIP
    12
"""

from __future__ import annotations

import getpass
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import AppPolicy, Settings
from ackfold.ledger import ids, status
from ackfold.ledger.lock import ledger_lock
from ackfold.ledger.tables import DEAD_LETTERS, REPLAY_LOG, ROOT_STATE, ROOTS, Ledger, spark_schema
from ackfold.ledger.values import hex64
from ackfold.sources.base import EXPIRED, Outbound, Sent, SourceQueue, dead_letter_attributes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("ackfold.replay")

REPLAY: Final = "replay"
DEAD_LETTER: Final = "dead_letter"
# What a manual replay may select; an automatic one takes failed and timed-out roots.
REPLAYABLE: Final = (status.FAILED, status.TIMED_OUT, status.DEAD_LETTERED)
DEFAULT_STATUSES: Final = (status.FAILED, status.TIMED_OUT)
# A root's init event is written right after its `roots` row: only clock skew between
# writers puts `ingested_at` after `first_event_at`.
CLOCK_SKEW: Final = timedelta(days=1)

# The events of the replay log, one row each: a send is `planned` before it is tried, and
# `sent` (with the new message id) or `failed` (with the error) after.
PLANNED: Final = "planned"
SENT: Final = "sent"
# `requested_by` of every automatic replay in `replay_log`.
AUTOMATIC: Final = "auto"
FAILED_SEND: Final = "failed"
# Where a planned send stands: not in the log yet, planned but never sent (a crash or a
# queue down), or SENT, after which only the statuses may be left to update.
NEW: Final = "new"
UNSENT: Final = "unsent"


class ReplayError(RuntimeError):
    """A replay could not send everything it planned; the log says what is left."""


class UnknownRoots(LookupError):
    """Root ids asked for by the user that `root_state` does not know."""


def _whoami() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


@dataclass(frozen=True)
class ReplayRequest:
    """What to replay. Filters combine with AND; `automatic` applies each app's policy
    (attempts, backoff) instead, and ignores the filters but `app`."""

    root_ids: tuple[int, ...] = ()
    app: str | None = None
    statuses: tuple[str, ...] = DEFAULT_STATUSES
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None
    rate: float | None = None
    dry_run: bool = False
    automatic: bool = False
    requested_by: str = field(default_factory=_whoami)

    def __post_init__(self) -> None:
        unknown = [s for s in self.statuses if s not in REPLAYABLE]
        if unknown or not self.statuses:
            raise ValueError(
                f"cannot replay status {', '.join(unknown) or '(none)'}: "
                f"choose from {', '.join(REPLAYABLE)}"
            )
        if self.since and self.until and self.since >= self.until:
            raise ValueError(f"--since ({self.since}) must be before --until ({self.until})")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be a positive number, got {self.limit}")
        if self.rate is not None and not self.rate > 0:
            raise ValueError(
                f"--rate must be a positive number of messages per second, got {self.rate}"
            )

    def describe(self) -> str:
        """The request as JSON, for the replay log's `request` column."""
        described = {k: v for k, v in asdict(self).items() if v not in (None, (), False)}
        described.pop("requested_by", None)
        return json.dumps(described, default=str, sort_keys=True)


@dataclass(frozen=True)
class Planned:
    """One message a run sends (or finishes the bookkeeping of)."""

    root_id: int
    app: str
    action: str
    prior_status: str
    attempt: int  # the new attempt's number
    origin_root_id: int
    new_root_id: int
    source: str
    source_queue: str
    target: str
    reason: str | None
    last_stage: str | None
    first_event_date: date
    payload: str | None = field(repr=False)
    source_position: str | None = None
    state: str = NEW
    planned_at: datetime | None = None

    def outbound(self) -> Outbound:
        attributes = (
            dead_letter_attributes(self.root_id, self.reason or "-", self.last_stage)
            if self.action == DEAD_LETTER
            else {}
        )
        return Outbound(
            self.root_id, self.origin_root_id, self.attempt, self.payload, attributes,
            self.source_position,
        )  # fmt: skip


@dataclass
class Plan:
    """The outcome of `Replayer.plan`: what to send, and what is skipped and why."""

    replay_id: str
    request: ReplayRequest
    selected: int
    sends: list[Planned]
    skipped: dict[str, int]

    @property
    def to_send(self) -> list[Planned]:
        return [p for p in self.sends if p.state != SENT]


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
    """Plans and executes replay runs over the ledger under `settings.table_root`."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        *,
        now: datetime | None = None,
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.ledger = Ledger(settings.table_root)
        self.now = (now or datetime.now(UTC)).astimezone(UTC)
        self._queues: dict[tuple[str, str, str], SourceQueue] = {}

    # -- planning ---------------------------------------------------------------------

    def plan(self, request: ReplayRequest) -> Plan:
        """Select and decide; writes nothing. Raises `UnknownRoots` for unknown root ids."""
        from pyspark.sql import functions as F

        self.ledger.create(self.spark)
        state = self._read(ROOT_STATE)
        if request.automatic:
            state = state.where(
                (F.col("first_event_date") >= F.lit(self._window_start()))
                & F.col("status").isin(*DEFAULT_STATUSES)
                & self._backoff_passed()
            )
        elif not request.root_ids:
            state = state.where(F.col("status").isin(*request.statuses))
        if request.app:
            state = state.where(F.col("app") == F.lit(request.app))
        if request.root_ids:
            state = state.where(F.col("root_id").isin(*request.root_ids))
        if request.since:
            state = state.where(F.col("status_changed_at") >= F.lit(request.since))
        if request.until:
            state = state.where(F.col("status_changed_at") < F.lit(request.until))
        limit = request.limit or (self.settings.replay.max_per_run if request.automatic else None)
        state = state.orderBy("status_changed_at", "root_id")
        if limit:
            state = state.limit(limit)
        candidates = [row.asDict() for row in state.drop("seen_event_hashes").collect()]
        missing = set(request.root_ids) - {row["root_id"] for row in candidates}
        if missing:
            raise UnknownRoots(
                "unknown root id(s), not in root_state: "
                + ", ".join(hex64(r) for r in sorted(missing))
            )
        # A broadcast join, not isin(): thousands of literals cost seconds to plan.
        chosen = F.broadcast(
            self.spark.createDataFrame([(r["root_id"],) for r in candidates], "root_id BIGINT")
        )
        roots = self._roots_of(candidates, chosen)
        logged = self._log_of(candidates, chosen)
        expired = self._expired(candidates, roots)
        sends: list[Planned] = []
        skipped: dict[str, int] = {}
        for row in candidates:
            decision = self._decide(request, row, roots.get(row["root_id"]), logged, expired)
            if isinstance(decision, str):
                skipped[decision] = skipped.get(decision, 0) + 1
            else:
                sends.append(decision)
        return Plan(str(uuid.uuid4()), request, len(candidates), sends, skipped)

    def _decide(
        self,
        request: ReplayRequest,
        row: dict[str, Any],
        root: dict[str, Any] | None,
        logged: dict[tuple[int, str], dict[str, Any]],
        expired: set[str],
    ) -> Planned | str:
        """The send for one selected root, or why it is skipped. A root whose message the
        source deleted, with no copy in `roots`, can only be dead-lettered (`EXPIRED`)."""
        current = row["status"]
        if current not in REPLAYABLE:
            return f"{current}: nothing to replay"
        if request.root_ids and current not in request.statuses:
            return f"{current}: not in --status {','.join(request.statuses)}"
        if root is None:
            return "not in the roots table: no payload to send"
        source = root["source"]
        if source not in SENDERS:
            return f"source {source!r} cannot be replayed"
        queue = self._queue(source, root["source_queue"] or "", row["app"])
        position = root["source_position"] if queue.rereads else None
        if root["payload"] is None and position is None:
            return "no payload stored"
        attempt = row["attempt"] or root["attempt"]
        origin = row["origin_root_id"] or root["origin_root_id"]
        policy = self.settings.app(row["app"])
        action = REPLAY
        reason = _reason(row)
        if request.automatic and attempt >= policy.max_attempts:
            action = DEAD_LETTER
        replay = logged.get((row["root_id"], REPLAY), {})
        # Gone at the source: by the watermarks now, or by an earlier run's re-read (a
        # compacted record); unless that replay was already sent.
        gone = position in expired or replay.get("gone", False)
        if gone and root["payload"] is None and not replay.get("sent"):
            if current == status.DEAD_LETTERED:
                return f"{EXPIRED}: nothing left to replay"
            action, reason = DEAD_LETTER, EXPIRED
        entry = logged.get((row["root_id"], action))
        planned = Planned(
            root_id=row["root_id"],
            app=row["app"],
            action=action,
            prior_status=current,
            attempt=attempt + 1,
            origin_root_id=origin,
            new_root_id=ids.root_id(row["app"], "", attempt + 1, origin),
            source=source,
            source_queue=queue.queue,
            target=queue.replay_queue if action == REPLAY else queue.dead_letter_queue,
            reason=reason,
            last_stage=row["last_stage"],
            first_event_date=row["first_event_date"],
            payload=root["payload"],
            source_position=position,
        )
        if entry is None:
            return planned
        state = SENT if entry["sent"] else UNSENT
        return replace(planned, state=state, planned_at=entry["planned_at"])

    def _roots_of(
        self, candidates: list[dict[str, Any]], chosen: DataFrame
    ) -> dict[int, dict[str, Any]]:
        from pyspark.sql import functions as F

        if not candidates:
            return {}
        earliest = min(row["first_event_at"] for row in candidates) - CLOCK_SKEW
        roots = (
            self._read(ROOTS).where(F.col("ingested_at") >= F.lit(earliest)).join(chosen, "root_id")
        )
        columns = ("root_id", "attempt", "origin_root_id", "source", "source_queue",
                   "source_position", "payload")  # fmt: skip
        return {row["root_id"]: row.asDict() for row in roots.select(*columns).collect()}

    def _expired(
        self, candidates: list[dict[str, Any]], roots: dict[int, dict[str, Any]]
    ) -> set[str]:
        """The positions of the candidates' messages that their sources no longer hold,
        asked once per queue (for sources that re-read; SQS roots keep their payload)."""
        positions: dict[SourceQueue, list[str]] = {}
        for row in candidates:
            root = roots.get(row["root_id"])
            if root is None or root["source"] not in SENDERS or not root["source_position"]:
                continue
            queue = self._queue(root["source"], root["source_queue"] or "", row["app"])
            if queue.rereads:
                positions.setdefault(queue, []).append(root["source_position"])
        return set().union(*(queue.expired(found) for queue, found in positions.items()))

    def _log_of(
        self, candidates: list[dict[str, Any]], chosen: DataFrame
    ) -> dict[tuple[int, str], dict[str, Any]]:
        from pyspark.sql import functions as F

        if not candidates:
            return {}
        # A root is planned after its status changed: older log rows cannot be about it.
        earliest = min(row["status_changed_at"] for row in candidates)
        entries = (
            self._read(REPLAY_LOG)
            .where(~F.col("dry_run") & (F.col("planned_at") >= F.lit(earliest)))
            .join(chosen, "root_id")
        )
        found: dict[tuple[int, str], dict[str, Any]] = {}
        rows = entries.select("root_id", "action", "event", "planned_at", "error").collect()
        for row in rows:
            entry = found.setdefault(
                (row["root_id"], row["action"]),
                {"planned_at": row["planned_at"], "sent": False, "gone": False},
            )
            entry["sent"] = entry["sent"] or row["event"] == SENT
            entry["gone"] = entry["gone"] or Sent(0, error=row["error"]).gone
        return found

    def _backoff_passed(self) -> Any:
        """Per app: attempt k waits replay_backoff * 2**(k-1) after its status changed. A
        root out of attempts does not wait: there is nothing to space out, it is dead."""
        from pyspark.sql import functions as F

        from ackfold.reconcile.spark_fold import policy_column

        def per_app(value: Callable[[AppPolicy], float]) -> Any:
            return policy_column(self.settings, F.col("app"), lambda p: F.lit(value(p)))

        base = per_app(lambda p: p.replay_backoff.total_seconds())
        attempt = F.coalesce(F.col("attempt"), F.lit(1))
        wait = base * F.pow(F.lit(2.0), attempt - 1)
        # As doubles, not unix_timestamp(): that drops the fraction of a second.
        waited = F.lit(self.now).cast("double") - F.col("status_changed_at").cast("double")
        return (waited >= wait) | (attempt >= per_app(lambda p: float(p.max_attempts)))

    # -- executing --------------------------------------------------------------------

    def execute(
        self,
        plan: Plan,
        *,
        progress: Progress | None = None,
        after_send: AfterSend | None = None,
    ) -> ReplaySummary:
        """Log, send, mark. `after_send` runs after each chunk is sent, before its mark."""
        started = time.monotonic()
        request = plan.request
        summary = ReplaySummary(
            plan.replay_id, request.dry_run, plan.selected, len(plan.sends), skipped=plan.skipped
        )
        new = [p for p in plan.sends if p.state == NEW]
        if request.dry_run:
            self._append_log(plan, new, PLANNED, dry_run=True)
            summary.seconds = time.monotonic() - started
            return summary
        # The bookkeeping MERGE must not race a reconcile. Callers that plan should hold
        # the lock from the plan on (see `replay`): it is re-entrant.
        with ledger_lock(self.settings.var_dir, f"replay {plan.replay_id}", say=log.info):
            logged_at = self._append_log(plan, new, PLANNED)
            plan.sends = [
                replace(p, planned_at=logged_at) if p.state == NEW else p for p in plan.sends
            ]
            done = [p for p in plan.sends if p.state == SENT]
            summary.already_sent = len(done)
            pending = plan.to_send
            chunk = self.settings.replay.chunk
            pacer = _Pacer(request.rate or self._rate(request))
            delivered: list[Planned] = list(done)
            results: dict[int, Sent] = {}
            for start in range(0, len(pending), chunk):
                batch = pending[start : start + chunk]
                results.update(self._send_with_retries(batch, pacer))
                if after_send:
                    after_send([results[p.root_id] for p in batch])
                # The mark is what keeps a re-run from sending again: one commit per chunk.
                self._mark(plan, batch, results)
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
            self._bookkeep(delivered, results)
            summary.seconds = time.monotonic() - started
        log.info("replay %s: %s", plan.replay_id, json.dumps(summary.as_dict(), default=str))
        return summary

    def _rate(self, request: ReplayRequest) -> float:
        if request.app:
            return self.settings.app(request.app).replay_rate
        return self.settings.defaults.replay_rate

    def _send_with_retries(self, batch: Sequence[Planned], pacer: _Pacer) -> dict[int, Sent]:
        results: dict[int, Sent] = {}
        todo = list(batch)
        delay = self.settings.replay.send_backoff.total_seconds()
        for round_ in range(self.settings.replay.send_attempts):
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
        results: list[Sent] = []
        groups: dict[tuple[str, str, str, str], list[Planned]] = {}
        for planned in batch:
            key = (planned.source, planned.source_queue, planned.app, planned.action)
            groups.setdefault(key, []).append(planned)
        for (source, queue_name, app, action), members in groups.items():
            queue = self._queue(source, queue_name, app)
            for start in range(0, len(members), queue.batch_size):
                group = members[start : start + queue.batch_size]
                pacer.wait(len(group))
                outbound = [p.outbound() for p in group]
                send = queue.republish if action == REPLAY else queue.dead_letter
                results.extend(send(outbound))
        return results

    # -- writing the ledger -----------------------------------------------------------

    def _append_log(
        self,
        plan: Plan,
        rows: Sequence[Planned],
        event: str,
        *,
        dry_run: bool = False,
        results: dict[int, Sent] | None = None,
    ) -> datetime:
        """Append one `event` row per send (a blind append: it never conflicts with a
        concurrent run). Returns the rows' time, which is `planned_at` for new plans."""
        now = self.now_wall()
        if not rows:
            return now
        request = plan.request
        who = AUTOMATIC if request.automatic else request.requested_by
        records = []
        for p in rows:
            sent = results.get(p.root_id) if results else None
            records.append(
                (plan.replay_id, event, who, request.describe(), p.root_id, p.app, p.action,
                 p.prior_status, p.attempt, p.origin_root_id, p.new_root_id, p.source,
                 p.target, p.reason, p.last_stage, p.first_event_date, dry_run,
                 p.planned_at or now, now if event == SENT else None,
                 sent.message_id if sent else None, sent.error if sent else None)
            )  # fmt: skip
        frame = self.spark.createDataFrame(records, spark_schema(REPLAY_LOG))
        frame.write.format("delta").mode("append").save(self.ledger.path(REPLAY_LOG))
        return now

    def _mark(self, plan: Plan, batch: Sequence[Planned], results: dict[int, Sent]) -> None:
        """After a chunk: a `sent` row for each delivered message, a `failed` row (with
        the error) for each that is still unsent."""
        self._append_log(plan, [p for p in batch if results[p.root_id].ok], SENT, results=results)
        failed = [p for p in batch if not results[p.root_id].ok]
        self._append_log(plan, failed, FAILED_SEND, results=results)

    def _bookkeep(self, done: Sequence[Planned], results: dict[int, Sent]) -> None:
        """After a send: root_state to replayed/dead_lettered; dead letters recorded."""
        if not done:
            return
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        now = self.now_wall()
        updates = self.spark.createDataFrame(
            [
                (p.root_id, status.REPLAYED if p.action == REPLAY else status.DEAD_LETTERED)
                for p in done
            ],
            "root_id BIGINT, status STRING",
        ).alias("s")
        dates = sorted({p.first_event_date for p in done})
        state = DeltaTable.forPath(self.spark, self.ledger.path(ROOT_STATE)).alias("t")
        (
            state.merge(
                updates,
                F.col("t.first_event_date").isin(*dates)
                & (F.col("t.root_id") == F.col("s.root_id")),
            )
            .whenMatchedUpdate(
                condition=F.col("t.status").isin(*REPLAYABLE),
                set={"status": F.col("s.status"), "status_changed_at": F.lit(now)},
            )
            .execute()
        )
        letters = [
            (p.root_id, p.app, p.origin_root_id, p.attempt - 1, p.source, p.source_queue,
             p.target, p.reason or p.prior_status, p.last_stage,
             results[p.root_id].message_id if p.root_id in results else None,
             now, None, None, p.action == REPLAY, p.new_root_id)
            for p in done
            if p.action == DEAD_LETTER or p.prior_status == status.DEAD_LETTERED
        ]  # fmt: skip
        if not letters:
            return
        source = self.spark.createDataFrame(
            letters,
            spark_schema(DEAD_LETTERS) + ", redrive BOOLEAN, new_root_id BIGINT",
        ).alias("s")
        table = DeltaTable.forPath(self.spark, self.ledger.path(DEAD_LETTERS)).alias("t")
        columns = [c for c in source.columns if c not in ("redrive", "new_root_id")]
        (
            table.merge(source, F.col("t.root_id") == F.col("s.root_id"))
            .whenMatchedUpdate(
                condition=F.col("s.redrive") & F.col("t.redriven_at").isNull(),
                set={"redriven_at": F.lit(now), "redrive_root_id": F.col("s.new_root_id")},
            )
            .whenNotMatchedInsert(
                condition=~F.col("s.redrive"),
                values={c: F.col(f"s.{c}") for c in columns},
            )
            .execute()
        )

    # -- helpers ----------------------------------------------------------------------

    def close(self) -> None:
        """Release the source queues' clients."""
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()

    def now_wall(self) -> datetime:
        """Log times are wall-clock times (the run's `now` may be set for timeouts)."""
        # Timezone-aware: Spark reads a naive datetime in the driver's local time zone.
        return datetime.now(UTC)

    def _read(self, table: str) -> DataFrame:
        return self.spark.read.format("delta").load(self.ledger.path(table))

    def _window_start(self) -> date:
        return (self.now - self.settings.reconcile.lookback).date()

    def _queue(self, source: str, queue: str, app: str) -> SourceQueue:
        key = (source, queue, app)
        if key not in self._queues:
            self._queues[key] = source_queue(self.settings, source, queue, app)
        return self._queues[key]


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


def _reason(row: dict[str, Any]) -> str:
    if row["status"] == status.TIMED_OUT:
        return f"timed out after stage {row['last_stage']}"
    if row.get("fail_reason"):
        return f"failed in {row.get('fail_stage') or row['last_stage']}: {row['fail_reason']}"
    return str(row["status"])


class _Pacer:
    """Keeps sends at or under `rate` messages per second, in bursts of one batch."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.next_at = time.monotonic()

    def wait(self, messages: int) -> None:
        delay = self.next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self.next_at = max(self.next_at, time.monotonic()) + messages * self.interval


def replay(
    spark: SparkSession,
    settings: Settings,
    request: ReplayRequest,
    *,
    now: datetime | None = None,
    progress: Progress | None = None,
) -> ReplaySummary:
    """Plan and execute one replay run; raises `ReplayError` if something stayed unsent.

    The ledger lock covers the plan as well: two runs planning the same root at once would
    both send it."""
    replayer = Replayer(spark, settings, now=now)
    try:
        with ledger_lock(settings.var_dir, f"replay by {request.requested_by}", say=log.info):
            summary = replayer.execute(replayer.plan(request), progress=progress)
    finally:
        replayer.close()
    if summary.not_sent:
        raise unsent_error(summary)
    return summary


def unsent_error(summary: ReplaySummary) -> ReplayError:
    """What to tell the user when a run left messages unsent."""
    return ReplayError(
        f"{summary.not_sent} message(s) not sent: {summary.last_error}. They stay in "
        "replay_log as planned, not sent; run `ackfold replay` again to send exactly those."
    )
