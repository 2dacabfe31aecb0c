"""Planning a replay run: select roots from `root_state` and decide, per root, what to send.

An automatic run selects by each app's policy (attempts, backoff); a manual one by the
user's filters. For each root it joins the payload (or position) from `roots` and what
`replay_log` already says about it, and decides: send a new attempt, dead-letter it, resend
what an earlier run planned but never marked sent, finish the bookkeeping of what it sent,
or skip it (with the reason). Planning writes nothing.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Any, Final

from ackfold.config import Settings
from ackfold.config.policy import AppPolicy
from ackfold.errors import AckfoldError
from ackfold.ledger.schema import ids, status
from ackfold.ledger.schema.tables import Ledger
from ackfold.replay.queues import SourceQueues, Unsendable
from ackfold.replay.request import REPLAYABLE, ReplayRequest
from ackfold.sources.base import (
    EXPIRED,
    Outbound,
    Sent,
    SourceQueue,
    Unreadable,
    dead_letter_attributes,
)

REPLAY: Final = "replay"
DEAD_LETTER: Final = "dead_letter"

# The replay log's mark of a delivered send (`ackfold.replay.bookkeeping`), and so the
# state of a send with at most the statuses left to update.
SENT: Final = "sent"
# Where a planned send stands: not in the log yet, planned but never sent (a crash or a
# queue down), or SENT, after which only the statuses may be left to update.
NEW: Final = "new"
UNSENT: Final = "unsent"
# What a planner reads of `roots` and of `replay_log`.
ROOT_COLUMNS: Final = ("root_id", "attempt", "origin_root_id", "source", "source_queue",
                       "source_message_id", "source_position", "payload")  # fmt: skip
LOG_COLUMNS: Final = ("root_id", "action", "event", "planned_at", "error")


class UnknownRoots(AckfoldError, LookupError):
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
            self.source_position, self.new_root_id,
        )  # fmt: skip


@dataclass
class Plan:
    """The outcome of `Replayer.plan`: what to send, and what is skipped and why."""

    replay_id: str
    request: ReplayRequest
    selected: int
    sends: list[Planned]
    skipped: dict[str, int]
    # When this run logged its new sends `planned`: their `planned_at` in later rows.
    logged_at: datetime | None = None

    @property
    def to_send(self) -> list[Planned]:
        return [p for p in self.sends if p.state != SENT]


class Planner(ABC):
    """Plans replay runs over the ledger under `settings.table_root`, as of `now`; `queues`
    are the run's source queues (a source that re-reads is asked what it still holds).

    The decisions are here, once; an engine reads the tables: `SparkPlanner`
    (`ackfold.replay.spark_planner`) or `EmbeddedPlanner` (`ackfold.replay.duck_planner`).
    Both hand over rows as dicts of Python values, so both plan alike."""

    def __init__(self, settings: Settings, queues: SourceQueues, *, now: datetime) -> None:
        self.settings = settings
        self.ledger = Ledger(settings.table_root)
        self.now = now
        self.queues = queues
        self._policies: dict[str, AppPolicy] = {}

    def close(self) -> None:
        """Release what the planner holds beside its engine (a connection); by default
        nothing."""
        return None

    def plan(self, request: ReplayRequest) -> Plan:
        """Select and decide; writes nothing. Raises `UnknownRoots` for unknown root ids."""
        limit = request.limit or (self.settings.replay.max_per_run if request.automatic else None)
        candidates = self._select(request, limit)
        missing = set(request.root_ids) - {row["root_id"] for row in candidates}
        if missing:
            raise UnknownRoots(
                "unknown root id(s), not in root_state: "
                + ", ".join(ids.format_id(r) for r in sorted(missing))
            )
        roots = self._roots_of(candidates) if candidates else {}
        logged = _fold_log(self._log_rows(candidates)) if candidates else {}
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

    def _policy(self, app: str) -> AppPolicy:
        """The app's policy, merged once per run (a plan may hold thousands of its roots)."""
        if app not in self._policies:
            self._policies[app] = self.settings.app(app)
        return self._policies[app]

    # -- what an engine reads ---------------------------------------------------------------

    @abstractmethod
    def _select(self, request: ReplayRequest, limit: int | None) -> list[dict[str, Any]]:
        """The `root_state` rows `request` selects (at least the columns `_decide` reads),
        by `status_changed_at` then `root_id`, at most `limit`: for
        an automatic run, the failed and timed-out roots whose backoff has passed (attempt
        k waits `replay_backoff * 2**(k-1)` after its status changed; a root out of
        attempts does not wait); for a manual one, by its filters."""

    @abstractmethod
    def _roots_of(self, candidates: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """The `roots` rows of the candidates (`ROOT_COLUMNS`), by root id, from those
        ingested after the earliest candidate's first event less `CLOCK_SKEW`."""

    @abstractmethod
    def _log_rows(self, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The `replay_log` rows about the candidates (`LOG_COLUMNS`), not dry runs,
        planned at or after the earliest candidate's `status_changed_at` (older rows
        cannot be about them: a root is planned after its status changed)."""

    # -- the decisions ------------------------------------------------------------------------

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
        can one whose position does not parse, and one whose source has no sender
        (`ackfold.replay.senders`). One in a topic that does not exist waits."""
        current = row["status"]
        if current not in REPLAYABLE:
            return f"{current}: nothing to replay"
        if request.root_ids and current not in request.statuses:
            return f"{current}: not in --status {','.join(request.statuses)}"
        if root is None:
            return "not in the roots table: no payload to send"
        source = root["source"]
        queue = self.queues.get(source, root["source_queue"] or "", row["app"])
        if isinstance(queue, Unsendable):
            # Nothing can ever send it: dead-lettered now, whatever its attempts, rather
            # than left failed for good (invariant 10).
            if current == status.DEAD_LETTERED:
                return f"{queue.reason}: nothing to replay"
            return self._planned(row, root, queue, logged, DEAD_LETTER, queue.reason, None)
        position = root["source_position"] if queue.rereads else None
        problem = unreadable.get(position) if position else None
        if problem is not None and not problem.final:
            return f"cannot re-read it: {problem.reason}"
        if problem is not None and root["payload"] is not None:
            position, problem = None, None  # the stored copy goes instead
        if root["payload"] is None and position is None:
            return "no payload stored"
        attempt = row["attempt"] or root["attempt"]
        policy = self._policy(row["app"])
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
        return self._planned(row, root, queue, logged, action, reason, position)

    def _planned(
        self,
        row: dict[str, Any],
        root: dict[str, Any],
        queue: SourceQueue,
        logged: dict[tuple[int, str], dict[str, Any]],
        action: str,
        reason: str | None,
        position: str | None,
    ) -> Planned:
        """The send `_decide` chose for one root: its new attempt, and where it stands
        in the replay log."""
        attempt = row["attempt"] or root["attempt"]
        origin = row["origin_root_id"] or root["origin_root_id"]
        planned = Planned(
            root_id=row["root_id"],
            app=row["app"],
            action=action,
            prior_status=row["status"],
            attempt=attempt + 1,
            origin_root_id=origin,
            new_root_id=ids.root_id(row["app"], "", attempt + 1, origin),
            source=root["source"],
            source_queue=queue.queue,
            target=queue.replay_queue if action == REPLAY else queue.dead_letter_queue,
            reason=reason,
            last_stage=row["last_stage"],
            first_event_date=row["first_event_date"],
            payload=root["payload"],
            source_position=position,
        )
        entry = logged.get((row["root_id"], action))
        if entry is None:
            return planned
        state = SENT if entry["sent"] else UNSENT
        return replace(planned, state=state, planned_at=entry["planned_at"])

    def _expired(
        self, candidates: list[dict[str, Any]], roots: dict[int, dict[str, Any]]
    ) -> tuple[set[str], dict[str, Unreadable]]:
        """The positions of the candidates' messages that their sources no longer hold,
        and those they cannot re-read at all, with why: asked once per queue (for sources
        that re-read; SQS roots keep their payload)."""
        positions: dict[SourceQueue, dict[str, str | None]] = {}
        for row in candidates:
            root = roots.get(row["root_id"])
            if root is None or not root["source_position"]:
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


def _fold_log(rows: list[dict[str, Any]]) -> dict[tuple[int, str], dict[str, Any]]:
    """Per (root, action): when it was first planned, whether it was sent, and whether a
    send found its message gone at the source."""
    found: dict[tuple[int, str], dict[str, Any]] = {}
    for row in rows:
        entry = found.setdefault(
            (row["root_id"], row["action"]),
            {"planned_at": row["planned_at"], "sent": False, "gone": False},
        )
        entry["planned_at"] = min(entry["planned_at"], row["planned_at"])
        entry["sent"] = entry["sent"] or row["event"] == SENT
        entry["gone"] = entry["gone"] or Sent(0, error=row["error"]).gone
    return found


def _reason(row: dict[str, Any]) -> str:
    if row["status"] == status.TIMED_OUT:
        return f"timed out after stage {row['last_stage']}"
    if row.get("fail_reason"):
        return f"failed in {row.get('fail_stage') or row['last_stage']}: {row['fail_reason']}"
    return str(row["status"])
