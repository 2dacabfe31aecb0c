"""The ledger's rows as the CLI and the UI read them: a root's state, its events, where it
came from and its attempts (together, its `Journey`), and a page of roots.

Each has `to_json()`: times as ISO-8601 UTC, 64-bit values and ids as 0x hex
(`ids.format_id`: a JSON number loses 64-bit precision in JavaScript and jq).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta
from typing import Any, Final

from ackfold.ledger.reading.parse import RootQuery
from ackfold.ledger.schema.ids import format_id, shown_ids
from ackfold.ledger.schema.values import hex64, iso, jsonable, utc


@dataclass(frozen=True)
class StageWait:
    """One stage that wrote events of a root: how many, and when it last wrote."""

    stage: str
    events: int
    last_at: datetime
    waited: timedelta

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "events": self.events,
            "last_at": iso(self.last_at, precise=True),
            "waited_seconds": round(self.waited.total_seconds(), 3),
        }


@dataclass(frozen=True)
class PendingExplanation:
    """What a waiting root waits for. `stages`: the stages that wrote its events, newest
    first, any of which may have emitted the open tuples; `stopped_at` the newest;
    `never_acked` the app-wide finding about it, when there is one."""

    waiting_for: str
    stages: tuple[StageWait, ...]
    stopped_at: str | None
    never_acked: str | None
    note: str

    def lines(self) -> list[str]:
        """For people: `ackfold show` prints them, the root page shows the same."""
        out = [self.waiting_for]
        for wait in self.stages:
            mark = " (stopped here)" if wait.stage == self.stopped_at else ""
            out.append(
                f"  {wait.stage}: {wait.events} event(s), last at {iso(wait.last_at)}, "
                f"waited {span(wait.waited)}{mark}"
            )
        if self.never_acked:
            out.append(self.never_acked)
        if self.note:
            out.append(self.note)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "waiting_for": self.waiting_for,
            "stages": [wait.to_json() for wait in self.stages],
            "stopped_at": self.stopped_at,
            "never_acked": self.never_acked,
            "note": self.note,
        }


def span(waited: timedelta) -> str:
    """A wait for people: `3d 4h`, `2h 5m`, `4m 10s`, `12s`.

    Example:
        >>> span(timedelta(hours=2, minutes=5, seconds=9)), span(timedelta(seconds=-3))
        ('2h 5m', '0s')
    """
    total = max(0, int(waited.total_seconds()))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"


@dataclass(frozen=True)
class RootState:
    """A `root_state` row, without the reconciler's bookkeeping columns."""

    root_id: int
    app: str
    status: str
    xor_acc: int
    event_count: int
    first_event_at: datetime
    last_event_at: datetime
    status_changed_at: datetime
    attempt: int | None
    origin_root_id: int | None
    last_stage: str
    fail_reason: str | None
    fail_stage: str | None
    fail_at: datetime | None
    init_seen: bool
    first_event_date: date

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: times as ISO-8601 UTC, `xor_acc` and the ids as 0x hex."""
        out = {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}
        out["xor_acc"] = hex64(self.xor_acc)
        return shown_ids(out)


STATE_COLUMNS: Final = tuple(f.name for f in fields(RootState))


@dataclass(frozen=True)
class RootPage:
    """One page of `ackfold roots`: `more` says that more roots matched than `limit`."""

    roots: list[RootState]
    more: bool
    query: RootQuery


@dataclass(frozen=True)
class Event:
    """One `ack_events` row of a root. `duplicate` marks a repeated `event_id`: the fold
    counts it once."""

    event_id: str
    kind: str
    stage: str
    event_time: datetime
    ack_val: int
    reason: str | None
    duplicate: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}
        out["ack_val"] = hex64(self.ack_val)
        return out


@dataclass(frozen=True)
class Source:
    """Where a root came from (its `roots` row). The payload is only ever a capped preview."""

    source: str
    source_queue: str | None
    source_message_id: str | None
    source_position: str | None
    ingested_at: datetime
    payload_preview: str | None
    payload_chars: int
    payload_truncated: bool

    def to_json(self) -> dict[str, Any]:
        return {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class Attempt:
    """One root of a replay chain. `status` is None while the root is not reconciled."""

    root_id: int
    attempt: int
    ingested_at: datetime | None
    status: str | None

    def to_json(self) -> dict[str, Any]:
        return shown_ids({f.name: jsonable(getattr(self, f.name)) for f in fields(self)})


@dataclass(frozen=True)
class Journey:
    """Everything `ackfold show` prints about one root. `pending` says what a root that
    has not completed waits for (`ackfold.ledger.reading.pending`); None for a settled root."""

    state: RootState
    source: Source | None
    events: list[Event]
    origin_root_id: int
    attempts: list[Attempt]
    pending: PendingExplanation | None = None

    @property
    def stages(self) -> list[tuple[str, list[Event]]]:
        """Events grouped by stage; stages in the order of their first event, events in
        time order."""
        groups: dict[str, list[Event]] = {}
        for event in self.events:
            groups.setdefault(event.stage, []).append(event)
        return list(groups.items())

    @property
    def unreconciled(self) -> int:
        """Distinct events in `ack_events` beyond those the last reconcile folded."""
        distinct = sum(1 for event in self.events if not event.duplicate)
        return max(0, distinct - self.state.event_count)

    def to_json(self) -> dict[str, Any]:
        return {
            "root_id": format_id(self.state.root_id),
            "state": self.state.to_json(),
            "source": self.source.to_json() if self.source else None,
            "stages": [
                {"stage": stage, "events": [event.to_json() for event in events]}
                for stage, events in self.stages
            ],
            "unreconciled_events": self.unreconciled,
            "origin_root_id": format_id(self.origin_root_id),
            "attempts": [attempt.to_json() for attempt in self.attempts],
            "pending": self.pending.to_json() if self.pending else None,
        }


def state_from_row(row: dict[str, Any]) -> RootState:
    """A `root_state` row as delta-rs returns it (a dict), as a `RootState` in UTC."""
    values = {name: row[name] for name in STATE_COLUMNS}
    for name in ("first_event_at", "last_event_at", "status_changed_at", "fail_at"):
        if values[name] is not None:
            values[name] = utc(values[name])
    return RootState(**values)
