"""Planning a replay run: select roots from `root_state` and decide, per root, what to send.

An automatic run selects by each app's policy (attempts, backoff); a manual one by the
user's filters. For each root it joins the payload (or position) from `roots` and what
`replay_log` already says about it, and decides: send a new attempt, dead-letter it, resend
what an earlier run planned but never marked sent, finish the bookkeeping of what it sent,
or skip it (with the reason). Planning writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import Settings
from ackfold.config.policy import AppPolicy
from ackfold.ledger import ids, status
from ackfold.ledger.tables import REPLAY_LOG, ROOT_STATE, ROOTS, Ledger
from ackfold.replay.queues import SENDERS, SourceQueues
from ackfold.replay.request import DEFAULT_STATUSES, REPLAYABLE, ReplayRequest
from ackfold.sources.base import (
    EXPIRED,
    Outbound,
    Sent,
    SourceQueue,
    Unreadable,
    dead_letter_attributes,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REPLAY: Final = "replay"
DEAD_LETTER: Final = "dead_letter"
# A root's init event is written right after its `roots` row: only clock skew between
# writers puts `ingested_at` after `first_event_at`.
CLOCK_SKEW: Final = timedelta(days=1)

# The replay log's mark of a delivered send (`ackfold.replay.bookkeeping`), and so the
# state of a send with at most the statuses left to update.
SENT: Final = "sent"
# Where a planned send stands: not in the log yet, planned but never sent (a crash or a
# queue down), or SENT, after which only the statuses may be left to update.
NEW: Final = "new"
UNSENT: Final = "unsent"


class UnknownRoots(LookupError):
    """Root ids asked for by the user that `root_state` does not know."""


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


class Planner:
    """Plans replay runs over the ledger under `settings.table_root`, as of `now`; `queues`
    are the run's source queues (a source that re-reads is asked what it still holds)."""

    def __init__(
        self, spark: SparkSession, settings: Settings, queues: SourceQueues, *, now: datetime
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.ledger = Ledger(settings.table_root)
        self.now = now
        self.queues = queues

    def plan(self, request: ReplayRequest) -> Plan:
        """Select and decide; writes nothing. Raises `UnknownRoots` for unknown root ids."""
        from pyspark.sql import functions as F

        self.ledger.create(self.spark)
        state = self._read(ROOT_STATE)
        if request.automatic:
            # Wherever they sit in time (roots a long reconciler outage left behind too):
            # `status` partitions root_state, so only these statuses' files are read.
            state = state.where(F.col("status").isin(*DEFAULT_STATUSES) & self._backoff_passed())
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
                + ", ".join(ids.format_id(r) for r in sorted(missing))
            )
        # A broadcast join, not isin(): thousands of literals cost seconds to plan.
        chosen = F.broadcast(
            self.spark.createDataFrame([(r["root_id"],) for r in candidates], "root_id BIGINT")
        )
        roots = self._roots_of(candidates, chosen)
        logged = self._log_of(candidates, chosen)
        expired, unreadable = self._expired(candidates, roots)
        sends: list[Planned] = []
        skipped: dict[str, int] = {}
        for row in candidates:
            root = roots.get(row["root_id"])
            decision = self._decide(request, row, root, logged, expired, unreadable)
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
        unreadable: dict[str, Unreadable],
    ) -> Planned | str:
        """The send for one selected root, or why it is skipped. A root whose message the
        source deleted, with no copy in `roots`, can only be dead-lettered (`EXPIRED`); so
        can one whose position does not parse. One in a topic that does not exist waits."""
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
        queue = self.queues.get(source, root["source_queue"] or "", row["app"])
        position = root["source_position"] if queue.rereads else None
        problem = unreadable.get(position) if position else None
        if problem is not None and not problem.final:
            return f"cannot re-read it: {problem.reason}"
        if problem is not None and root["payload"] is not None:
            position, problem = None, None  # the stored copy goes instead
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
        if problem is not None:
            if current == status.DEAD_LETTERED:
                return f"{problem.reason}: nothing to replay"
            action, reason, position = DEAD_LETTER, problem.reason, None
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
                   "source_message_id", "source_position", "payload")  # fmt: skip
        return {row["root_id"]: row.asDict() for row in roots.select(*columns).collect()}

    def _expired(
        self, candidates: list[dict[str, Any]], roots: dict[int, dict[str, Any]]
    ) -> tuple[set[str], dict[str, Unreadable]]:
        """The positions of the candidates' messages that their sources no longer hold,
        and those they cannot re-read at all, with why: asked once per queue (for sources
        that re-read; SQS roots keep their payload)."""
        positions: dict[SourceQueue, dict[str, str | None]] = {}
        for row in candidates:
            root = roots.get(row["root_id"])
            if root is None or root["source"] not in SENDERS or not root["source_position"]:
                continue
            queue = self.queues.get(root["source"], root["source_queue"] or "", row["app"])
            if queue.rereads:
                found = positions.setdefault(queue, {})
                found[root["source_position"]] = root["source_message_id"]
        expired: set[str] = set()
        unreadable: dict[str, Unreadable] = {}
        for queue, found in positions.items():
            bad = queue.unreadable(found, found)
            unreadable.update(bad)
            expired |= queue.expired([p for p in found if p not in bad])
        return expired, unreadable

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

    def _read(self, table: str) -> DataFrame:
        return self.spark.read.format("delta").load(self.ledger.path(table))


def _reason(row: dict[str, Any]) -> str:
    if row["status"] == status.TIMED_OUT:
        return f"timed out after stage {row['last_stage']}"
    if row.get("fail_reason"):
        return f"failed in {row.get('fail_stage') or row['last_stage']}: {row['fail_reason']}"
    return str(row["status"])
