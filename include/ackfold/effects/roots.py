"""The roots whose effects are found or retracted, as the ledger knows them: dead letters
selected from `root_state`, and why a root's rows are not a dead letter's to take.

A retract deletes by origin: every attempt of a message shares its `origin_root_id`, so
the rows of a dead letter's origin are its own only if no attempt of the message
completed, and no attempt is under way. `refusals` says, per root, what stands in the way:

- it is not a dead letter (its `root_state` status is another);
- an attempt of its message completed (`completed`, or `completed_late`);
- a newer attempt exists (registered in `roots`, pending, failed or timed out: a replay
  brought it back), or a replay of it was planned and not settled (`replay_log`).

The reads go through delta-rs (`ackfold.ledger.reading.reader.LedgerReader`); their predicates
hold only ackfold's column names, status constants and integers (root ids through
`int()`). An app name and a time range are compared in Python, never put into SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from ackfold.effects.errors import UnknownRoots
from ackfold.ledger.schema import status
from ackfold.ledger.schema.ids import format_id
from ackfold.ledger.schema.tables import REPLAY_LOG, ROOT_STATE, ROOTS
from ackfold.ledger.schema.values import utc

if TYPE_CHECKING:
    from ackfold.config import Settings
    from ackfold.ledger.reading.reader import LedgerReader

_STATE: Final = ("root_id", "app", "status", "attempt", "origin_root_id", "status_changed_at")
# Why a root is refused, as `RetractPlan.skipped` counts them.
NOT_DEAD: Final = "not a dead letter"
COMPLETED: Final = "an attempt of its message completed"
REPLAYING: Final = "its message is being replayed"
_DONE: Final = (status.COMPLETED, status.COMPLETED_LATE)


@dataclass(frozen=True)
class RootRef:
    """A root as `root_state` holds it: what finding its effects needs."""

    root_id: int
    app: str
    origin_root_id: int
    attempt: int | None = None
    status: str | None = None
    status_changed_at: datetime | None = None


@dataclass(frozen=True)
class Refusal:
    """Why a root's rows may not be retracted: `kind` (one of the constants above) and
    the whole story, for its message."""

    kind: str
    why: str


def reader(settings: Settings) -> LedgerReader:
    from ackfold.ledger.reading.reader import LedgerReader

    return LedgerReader(settings.table_root)


def roots_by_id(settings: Settings, root_ids: Sequence[int]) -> list[RootRef]:
    """The `root_state` rows of `root_ids`, in their order; `UnknownRoots` for the ids it
    does not hold (`NoLedger` without a `root_state`)."""
    if not root_ids:
        return []
    ids = ", ".join(str(int(r)) for r in dict.fromkeys(root_ids))
    rows = reader(settings).query(ROOT_STATE, _STATE, [f"root_id IN ({ids})"], required=True)
    found = {row["root_id"]: row for row in rows}
    missing = tuple(r for r in root_ids if r not in found)
    if missing:
        raise UnknownRoots(missing)
    return _refs(settings, [found[r] for r in dict.fromkeys(root_ids)])


def dead_letters(
    settings: Settings,
    *,
    app: str | None = None,
    root_ids: Sequence[int] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = None,
) -> list[RootRef]:
    """The roots whose status is `dead_lettered` (their partitions only), of `app`, of
    `root_ids`, dead-lettered in [`since`, `until`): oldest first, at most `limit`."""
    where = [f"status = '{status.DEAD_LETTERED}'"]
    if root_ids is not None:
        if not root_ids:
            return []
        where.append(f"root_id IN ({', '.join(str(int(r)) for r in root_ids)})")
    rows = reader(settings).query(ROOT_STATE, _STATE, where)
    chosen = [
        row
        for row in rows
        if (app is None or row["app"] == app)
        and (since is None or utc(row["status_changed_at"]) >= since)
        and (until is None or utc(row["status_changed_at"]) < until)
    ]
    chosen.sort(key=lambda row: (utc(row["status_changed_at"]), row["root_id"]))
    return _refs(settings, chosen[:limit] if limit else chosen)


def refusals(settings: Settings, roots: Sequence[RootRef]) -> dict[int, Refusal]:
    """Per root of `roots` whose origin's rows are not its own to retract, why (see the
    module's docs); the others are not in the answer."""
    if not roots:
        return {}
    led = reader(settings)
    origins = ", ".join(str(int(o)) for o in {r.origin_root_id for r in roots})
    attempts = led.query(ROOTS, ("root_id", "attempt", "origin_root_id"),
                         [f"origin_root_id IN ({origins})"])  # fmt: skip
    states = led.query(ROOT_STATE, _STATE, [f"origin_root_id IN ({origins})"])
    known = {r.root_id for r in roots}
    others = [a["root_id"] for a in attempts if a["root_id"] not in known]
    if others:
        ids = ", ".join(str(int(r)) for r in others)
        states += led.query(ROOT_STATE, _STATE, [f"root_id IN ({ids})"])
    by_origin: dict[int, dict[int, dict[str, Any]]] = {}
    for row in attempts:
        entry = {"root_id": row["root_id"], "attempt": row["attempt"], "status": None}
        by_origin.setdefault(row["origin_root_id"], {})[row["root_id"]] = entry
    for row in states:
        origin = row["origin_root_id"]
        if origin is None:  # an old root_state row: its roots row said it
            origin = next((o for o, c in by_origin.items() if row["root_id"] in c), None)
        if origin is not None:
            entry = by_origin.setdefault(origin, {}).setdefault(row["root_id"], {})
            entry.update(root_id=row["root_id"], status=row["status"])
            entry.setdefault("attempt", row["attempt"])
    in_flight = _replays_in_flight(led, roots)
    refused: dict[int, Refusal] = {}
    for root in roots:
        found = _refusal(root, by_origin.get(root.origin_root_id, {}), in_flight)
        if found is not None:
            refused[root.root_id] = found
    return refused


def _refusal(
    root: RootRef, chain: dict[int, dict[str, Any]], in_flight: dict[int, str]
) -> Refusal | None:
    """Why `root`'s origin's rows are not its own, given every attempt of its message
    (`chain`: root id -> attempt, status) and the replays planned of it; None if they are."""
    if root.status in _DONE:
        return Refusal(NOT_DEAD, f"it is {root.status}, not dead_lettered: its rows are a "
                       "completed message's output")  # fmt: skip
    for other in sorted(chain.values(), key=lambda c: (c.get("attempt") or 0, c["root_id"])):
        if other["root_id"] != root.root_id and other.get("status") in _DONE:
            return Refusal(COMPLETED, f"{_attempt(other)} of its message completed "
                           f"({other['status']}): its rows are a completed message's output, "
                           "not a dead letter's")  # fmt: skip
    if root.status != status.DEAD_LETTERED:
        return Refusal(NOT_DEAD, f"it is {root.status or 'unknown'}, not dead_lettered: only "
                       "a dead letter's effects are retracted")  # fmt: skip
    newer = [
        c for c in chain.values()
        if c["root_id"] != root.root_id and (c.get("attempt") or 0) > (root.attempt or 0)
    ]  # fmt: skip
    if newer:
        other = max(newer, key=lambda c: c.get("attempt") or 0)
        state = other.get("status") or "registered, not reconciled yet"
        return Refusal(REPLAYING, f"{_attempt(other)} of its message is {state}: retract "
                       "that attempt once it is dead-lettered")  # fmt: skip
    if root.root_id in in_flight:
        return Refusal(REPLAYING, in_flight[root.root_id])
    return None


def _attempt(entry: dict[str, Any]) -> str:
    return f"attempt {entry.get('attempt') or '?'} (root {format_id(entry['root_id'])})"


def _replays_in_flight(led: LedgerReader, roots: Sequence[RootRef]) -> dict[int, str]:
    """Per root of `roots` that a replay (not a dry run) planned to send back, and whose
    status has not moved since: the replay's story. Its next run sends it."""
    from ackfold.replay.planner import REPLAY

    ids = ", ".join(str(int(r.root_id)) for r in roots)
    rows = led.query(
        REPLAY_LOG,
        ("root_id", "replay_id", "event", "planned_at", "new_root_id"),
        [f"root_id IN ({ids})", f"action = '{REPLAY}'", "NOT dry_run"],
    )
    found: dict[int, str] = {}
    for row in sorted(rows, key=lambda r: utc(r["planned_at"])):
        new = f" as root {format_id(row['new_root_id'])}" if row["new_root_id"] is not None else ""
        found[row["root_id"]] = (
            f"replay {row['replay_id']} sends it back{new} "
            f"(planned at {utc(row['planned_at']).isoformat()}, {row['event']}): retract it "
            "once that attempt is dead-lettered"
        )
    return found


def _refs(settings: Settings, rows: Iterable[dict[str, Any]]) -> list[RootRef]:
    """`RootRef`s of `root_state` rows; an origin missing there (a row of an older
    ackfold) is read from `roots`, else the root is its own origin."""
    rows = list(rows)
    lacking = [row["root_id"] for row in rows if row["origin_root_id"] is None]
    origins: dict[int, int] = {}
    if lacking:
        ids = ", ".join(str(int(r)) for r in lacking)
        for row in reader(settings).query(
            ROOTS, ("root_id", "origin_root_id"), [f"root_id IN ({ids})"]
        ):
            origins[row["root_id"]] = row["origin_root_id"]
    return [
        RootRef(
            row["root_id"],
            row["app"],
            row["origin_root_id"]
            if row["origin_root_id"] is not None
            else origins.get(row["root_id"], row["root_id"]),
            row["attempt"],
            row["status"],
            utc(row["status_changed_at"]),
        )
        for row in rows
    ]
