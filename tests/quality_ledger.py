"""A ledger for the quality checks, written without a JVM: healthy roots, and on roots of
their own, every fault the quality checks must catch (those `tests/sqs/test_quality.py`
seeds on a ledger from the real cycle), so one run shows each fault caught by its own
expectation. Both engines check this same ledger in the conformance test.

Events and roots come from the real `Tracker`, `root_state` rows from the reference
`fold`, with the status each root's story gives it; `replay_log`, `dead_letters` and
`sent_messages` rows as the replay and the producer write them.

Example:
    >>> ledger = faulty_ledger(tempfile.mkdtemp())        # doctest: +SKIP
    >>> len(ledger.good), ledger.early < ledger.late      # doctest: +SKIP
    (15, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from ackfold.config import Settings, load_settings
from ackfold.ledger.schema import ids, status
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    DEAD_LETTERS,
    REPLAY_LOG,
    ROOT_STATE,
    ROOTS,
    SENT_MESSAGES,
)
from ackfold.reconcile.fold import fold
from ackfold.replay.bookkeeping import AUTOMATIC
from ackfold.track.tracker import Tracker
from tests.ledger_fixtures import Clock, append_arrow, arrow_schema, state_row, write_rows

APP = "numbers"
QUEUE = "numbers-q"
T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
GOOD = 15
FLAKY = 3
# Per-app thresholds over the defaults (1% each): the poison message and two more
# dead-lettered are 3 of 19 messages.
APP_QUALITY = {"max_dead_letter_rate": 0.1}


def quality_settings(var: Path, **overrides: Any) -> Settings:
    apps = {APP: {"quality": APP_QUALITY}, **overrides.pop("apps", {})}
    return load_settings(
        var_dir=var,
        defaults={"max_attempts": 2, "replay_backoff": "1s"},
        apps=apps,
        **overrides,
    )


@dataclass
class FaultyLedger:
    """Which root is which. `early`: a time when no root of the window is overdue yet
    (only the ledger faults and the latency show); `late`: every root is overdue."""

    warehouse: str
    good: list[int] = field(default_factory=list)
    flaky: list[tuple[int, int]] = field(default_factory=list)
    poison: list[int] = field(default_factory=list)
    third: int = 0  # a third attempt of the poison message, past max_attempts
    ancient: int = 0  # pending since ten days before the window: overdue wherever it sits
    early: datetime = T0 + timedelta(minutes=10)
    late: datetime = T0 + timedelta(hours=2)


def faulty_ledger(warehouse: str | Path, *, faults: bool = True) -> FaultyLedger:
    """Write the ledger under `warehouse`; see the module's docstring. Without `faults`,
    a healthy ledger: every check passes at any time."""
    ledger = FaultyLedger(str(warehouse))
    clock = Clock(T0)
    tracker = Tracker(APP, clock=clock)
    states: list[dict[str, Any]] = []
    roots: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    sends: list[dict[str, Any]] = []
    dead: list[dict[str, Any]] = []

    def drain() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        new_roots = [dict(r) for r in tracker.drain_roots()]
        new_events = [dict(e) for e in tracker.drain()]
        roots.extend(new_roots)
        events.extend(new_events)
        return new_roots, new_events

    def settle(root_events: list[dict[str, Any]], root_status: str, attempt: int, origin: int):  # type: ignore[no-untyped-def]
        (folded,) = fold(root_events).values()
        row = state_row(folded, root_status=root_status, attempt=attempt, origin_root_id=origin)
        states.append(row)
        return row

    def message(name: str, *, fails: bool = False, attempt: int = 1, origin: int | None = None):  # type: ignore[no-untyped-def]
        t = tracker.spout(name, source="sqs", source_queue=QUEUE, attempt=attempt,
                          origin_root_id=origin, payload=f'{{"n": "{name}"}}')  # fmt: skip
        clock.tick()
        if fails:
            tracker.fail(t, stage="work", reason="poisoned input")
        else:
            child = tracker.emit([t], stage="work")
            tracker.ack(t, stage="work")
            clock.tick()
            tracker.ack(child, stage="sink")
        clock.tick()
        return t.roots[0], drain()[1]

    for i in range(GOOD):
        root, evs = message(f"m-{i}")
        settle(evs, status.COMPLETED, 1, root)
        ledger.good.append(root)
    first_tries = []
    for i in range(FLAKY):
        root, evs = message(f"f-{i}", fails=True)
        first_tries.append((root, evs))
    poison, poison_events = message("p-0", fails=True)

    # Five minutes on, the replay sends the second attempts.
    clock.at(T0 + timedelta(minutes=5))
    for i, (root, evs) in enumerate(first_tries):
        settle(evs, status.REPLAYED, 1, root)
        retry, retry_events = message(f"f-{i}", attempt=2, origin=root)
        settle(retry_events, status.COMPLETED, 2, root)
        sends.append(_send(root, retry, 2, clock.now))
        ledger.flaky.append((root, retry))
    settle(poison_events, status.REPLAYED, 1, poison)
    second, second_events = message("p-0", fails=True, attempt=2, origin=poison)
    sends.append(_send(poison, second, 2, clock.now))
    row = settle(second_events, status.DEAD_LETTERED, 2, poison)
    dead.append(_dead_letter(row, clock.now))
    ledger.poison = [poison, second]

    if faults:
        # Pending since long before the window: the reconciler was away.
        clock.at(T0 - timedelta(days=10))
        t = tracker.spout("ancient", source="sqs", source_queue=QUEUE)
        ledger.ancient = t.roots[0]
        settle(drain()[1], status.PENDING, 1, ledger.ancient)
        _ledger_faults(ledger, roots, events, states)
        _delivery_faults(ledger, roots, events, states)
    sent = [
        {"app": APP, "source": "sqs", "source_queue": QUEUE,
         "source_message_id": r["source_message_id"],
         "sent_at": r["ingested_at"] - timedelta(seconds=1)}
        for r in roots if r["attempt"] == 1 and r["root_id"] != ledger.ancient
    ]  # fmt: skip
    if faults:  # a message the producer sent that no root has
        sent.append({"app": APP, "source": "sqs", "source_queue": "numbers-x",
                     "source_message_id": "never-registered", "sent_at": T0})  # fmt: skip
    unique_sent = list({(s["source_queue"], s["source_message_id"]): s for s in sent}.values())

    # ack_events with a stage column that may be null: a writer that broke the contract.
    schema = arrow_schema(ACK_EVENTS)
    schema = schema.set(schema.get_field_index("stage"), pa.field("stage", pa.string()))
    append_arrow(warehouse, ACK_EVENTS, pa.Table.from_pylist(events, schema))
    write_rows(warehouse, ROOTS, roots)
    write_rows(warehouse, ROOT_STATE, states)
    write_rows(warehouse, REPLAY_LOG, sends)
    write_rows(warehouse, DEAD_LETTERS, dead)
    write_rows(warehouse, SENT_MESSAGES, unique_sent)
    return ledger


def _ledger_faults(
    ledger: FaultyLedger,
    roots: list[dict[str, Any]],
    events: list[dict[str, Any]],
    states: list[dict[str, Any]],
) -> None:
    """One fault per ledger expectation, each on its own good root (as
    `tests/sqs/test_quality.py`'s `ledger_faults`)."""
    g = ledger.good

    def init(root: int) -> dict[str, Any]:
        return next(e for e in events if e["root_id"] == root and e["kind"] == "init")

    def state(root: int) -> dict[str, Any]:
        return next(s for s in states if s["root_id"] == root)

    def registered(root: int) -> dict[str, Any]:
        return next(r for r in roots if r["root_id"] == root)

    events.append({**init(g[0]), "event_id": "fault-null-stage", "kind": "ack", "ack_val": 0,
                   "stage": None, "reason": None})  # fmt: skip
    events.append({**init(g[1]), "event_id": "fault-kind", "kind": "nack", "ack_val": 0})
    # An event id reused for another event (its ack_val differs): the fold keeps one.
    events.append({**init(g[2]), "ack_val": init(g[2])["ack_val"] ^ 1})
    # A root id registered for another message.
    roots.append({**registered(g[3]), "source_message_id": "another-message"})
    # A redelivery, which the contract allows: the same event and root, written again.
    events.append(dict(init(g[9])))
    roots.append(dict(registered(g[9])))
    registered(g[4])["origin_root_id"] = 12345
    # A third attempt of the poison message, past max_attempts 2, that nobody asked for.
    origin = ledger.poison[0]
    ledger.third = ids.root_id(APP, "", 3, origin)
    third = {"root_id": ledger.third, "attempt": 3, "source_message_id": "m-3",
             "ingested_at": T0 + timedelta(minutes=6)}  # fmt: skip
    roots.append({**registered(ledger.poison[1]), **third})
    states.append(dict(state(g[5])))
    state(g[6])["status"] = "done"
    state(g[7])["xor_acc"] = 42
    state(g[8]).update(status=status.FAILED, fail_reason=None)


def _delivery_faults(
    ledger: FaultyLedger,
    roots: list[dict[str, Any]],
    events: list[dict[str, Any]],
    states: list[dict[str, Any]],
) -> None:
    """One fault per delivery guarantee (as `tests/sqs/test_quality.py`'s
    `delivery_faults`)."""
    g = ledger.good
    # Lost: a root whose events never arrived (so it was never folded) ...
    events[:] = [e for e in events if e["root_id"] != g[10]]
    states[:] = [s for s in states if s["root_id"] != g[10]]
    # ... and a replay whose new attempt never reached the app.
    roots[:] = [r for r in roots if r["root_id"] != ledger.flaky[0][1]]
    # Duplicates: two replayed roots whose first attempt completed after all.
    late = {first for first, _ in ledger.flaky[1:]}
    for s in states:
        if s["root_id"] in late:
            s.update(status=status.COMPLETED_LATE, xor_acc=0, init_seen=True)
        # Dead letters: two more messages.
        if s["root_id"] in (g[11], g[12]):
            s["status"] = status.DEAD_LETTERED
        # Latency: every completed tree took an hour.
        if s["status"] == status.COMPLETED:
            s["last_event_at"] = s["first_event_at"] + timedelta(hours=1)


def _send(origin: int, new_root: int, attempt: int, at: datetime) -> dict[str, Any]:
    return {
        "replay_id": f"replay-{new_root}", "event": "sent", "requested_by": AUTOMATIC,
        "request": "{}", "root_id": origin, "app": APP, "action": "replay",
        "prior_status": status.FAILED, "attempt": attempt, "origin_root_id": origin,
        "new_root_id": new_root, "source": "sqs", "target": QUEUE,
        "first_event_date": at.date(), "dry_run": False, "planned_at": at, "sent_at": at,
        "message_id": f"sent-{new_root}",
    }  # fmt: skip


def _dead_letter(state: dict[str, Any], at: datetime) -> dict[str, Any]:
    return {
        "root_id": state["root_id"], "app": APP, "origin_root_id": state["origin_root_id"],
        "attempt": state["attempt"], "source": "sqs", "source_queue": QUEUE,
        "dead_letter_queue": f"{QUEUE}-dlq", "reason": "max attempts",
        "last_stage": state["last_stage"], "dead_lettered_at": at,
    }  # fmt: skip


TIMING_APP = "wc"


def timing_settings(var: Path, **overrides: Any) -> Settings:
    policy = {"timeout": "5m", "idle_timeout": "10m", "replay_backoff": "10m", "max_attempts": 3}
    return load_settings(var_dir=var, apps={TIMING_APP: policy}, **overrides)


def timing_ledger(warehouse: str | Path, now: datetime) -> dict[str, int]:
    """Roots at the edges of their policy's times, as a reconcile at `now` leaves them
    (`timing_settings`): `busy` (pending past its timeout, events within its idle
    timeout), `failed` (attempt 1 of 3, failed 20 minutes ago: within its backoff), `last`
    (attempt 3 of 3, failed 20 minutes ago: no backoff is owed), `fresh` (registered a
    minute ago). Returns their root ids by name."""
    clock = Clock(now)
    tracker = Tracker(TIMING_APP, clock=clock)
    named: dict[str, int] = {}
    states: list[dict[str, Any]] = []

    clock.at(now - timedelta(hours=1))
    busy = tracker.spout("busy")
    clock.at(now - timedelta(minutes=2))
    tracker.emit([busy], stage="split")
    tracker.ack(busy, stage="split")
    clock.at(now - timedelta(minutes=30))
    failed = tracker.spout("failed")
    clock.at(now - timedelta(minutes=20))
    tracker.fail(failed, stage="split", reason="bad input")
    clock.at(now - timedelta(minutes=30))
    last = tracker.spout("last", attempt=3, origin_root_id=ids.root_id(TIMING_APP, "test::last"))
    clock.at(now - timedelta(minutes=20))
    tracker.fail(last, stage="split", reason="bad input")
    clock.at(now - timedelta(minutes=1))
    fresh = tracker.spout("fresh")
    roots = [dict(r) for r in tracker.drain_roots()]
    events = [dict(e) for e in tracker.drain()]
    folds = fold(events)
    for name, t, root_status in (
        ("busy", busy, status.PENDING),
        ("failed", failed, status.FAILED),
        ("last", last, status.FAILED),
        ("fresh", fresh, status.PENDING),
    ):
        root = t.roots[0]
        named[name] = root
        row = next(r for r in roots if r["root_id"] == root)
        states.append(
            state_row(
                folds[root],
                root_status=root_status,
                attempt=row["attempt"],
                origin_root_id=row["origin_root_id"],
            )
        )
    write_rows(warehouse, ROOTS, roots)
    write_rows(warehouse, ACK_EVENTS, events)
    write_rows(warehouse, ROOT_STATE, states)
    return named
