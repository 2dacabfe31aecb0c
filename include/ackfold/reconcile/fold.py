"""The reference fold: what the Spark reconciler computes, in plain Python.

``fold`` XORs the de-duplicated ``ack_events`` of each root into its ack val, the way
Storm's Acker XORs ack vals into its pending map; ``classify`` turns a folded root into a
status. The Spark reconciler must give the same results on the same events: tests use this
module as the spec.

Example:
    >>> from datetime import datetime, timedelta, timezone
    >>> from ackfold.reconcile.fold import classify, fold
    >>> from ackfold.track.tracker import Tracker
    >>> t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> tracker = Tracker("orders", clock=lambda: t0)
    >>> order = tracker.spout("m-1")
    >>> folds = fold(tracker.drain())
    >>> classify(folds[order.roots[0]], now=t0, timeout=timedelta(minutes=5))
    'pending'
    >>> tracker.ack(order, stage="sink")
    >>> folds = fold(tracker.drain(), prior=folds)  # a later reconcile run
    >>> classify(folds[order.roots[0]], now=t0, timeout=timedelta(minutes=5))
    'completed'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ackfold.ledger.schema import status
from ackfold.ledger.schema.contract import EVENT_KINDS, FAIL, INIT

_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class RootFold:
    """The folded events of one root: its ack val so far and what the events said.

    ``last_stage`` is the stage of the latest event, by ``event_time`` and then by stage
    name; ``fail_reason``/``fail_stage`` come from the earliest fail event, by ``event_time``,
    then stage, then reason. Ties are broken by what the state keeps (``last_event_at`` and
    ``last_stage``, ``fail_at``, ``fail_stage`` and ``fail_reason``), never by event ids, so
    the same order holds across runs without keeping any id.

    Example:
        >>> from datetime import datetime, timezone
        >>> at = datetime(2024, 1, 1, tzinfo=timezone.utc)
        >>> f = RootFold(root_id=1, app="a", xor_acc=0, event_count=1, init_seen=True,
        ...              first_event_at=at, last_event_at=at, last_stage="spout")
        >>> f.complete, f.failed
        (True, False)
    """

    root_id: int
    app: str
    xor_acc: int
    event_count: int
    init_seen: bool
    first_event_at: datetime
    last_event_at: datetime
    last_stage: str
    fail_reason: str | None = None
    fail_stage: str | None = None
    fail_at: datetime | None = None
    seen_event_ids: frozenset[str] = frozenset()

    @property
    def complete(self) -> bool:
        """Invariant 3: the whole tree was processed iff the init is in and the XOR is 0."""
        return self.init_seen and self.xor_acc == 0

    @property
    def failed(self) -> bool:
        """A stage failed one of the tree's tuples."""
        return self.fail_at is not None


def fold(
    events: Iterable[Mapping[str, Any]], prior: Mapping[int, RootFold] | None = None
) -> dict[int, RootFold]:
    """Fold ``ack_events`` rows into ``prior`` (the result of earlier runs), per root.

    Events whose ``event_id`` was already folded, in this input or in ``prior``, are dropped:
    XOR undoes itself, so a duplicate must never reach the ack val (invariant 4). Folding
    all events at once or in any number of runs, in any order, gives the same result.
    ``prior`` is not modified. Copies of one ``event_id`` say the same thing by contract;
    if a re-run stamped a copy with another ``event_time``, the copy folded first wins, and
    of the copies in one input, the earliest.

    Example:
        >>> from datetime import datetime, timezone
        >>> at = datetime(2024, 1, 1, tzinfo=timezone.utc)
        >>> init = dict(event_id="e1", app="a", root_id=9, kind="init", ack_val=6,
        ...             stage="spout", event_time=at, reason=None)
        >>> ack = dict(init, event_id="e2", kind="ack", stage="sink")
        >>> folds = fold([init, ack, ack])  # the duplicate ack is dropped
        >>> folds[9].xor_acc, folds[9].event_count, folds[9].complete
        (0, 2, True)
    """
    result = dict(prior or {})
    by_root: dict[int, list[Mapping[str, Any]]] = {}
    for event in events:
        by_root.setdefault(event["root_id"], []).append(event)
    for root_id, root_events in by_root.items():
        result[root_id] = _fold_root(root_id, result.get(root_id), root_events)
    return result


def _last_order(event: Mapping[str, Any]) -> tuple[datetime, str]:
    return (event["event_time"], event["stage"])


def _fail_order(event: Mapping[str, Any]) -> tuple[datetime, str, str]:
    return (event["event_time"], event["stage"], event["reason"] or "")


def _fold_root(
    root_id: int, prior: RootFold | None, events: Sequence[Mapping[str, Any]]
) -> RootFold:
    seen = set(prior.seen_event_ids) if prior else set()
    new: list[Mapping[str, Any]] = []
    for event in sorted(events, key=lambda e: e["event_time"]):  # the earliest copy wins
        if event["event_id"] not in seen:
            seen.add(event["event_id"])
            new.append(event)
    if not new:
        assert prior is not None  # events is non-empty, so only prior can have seen them
        return prior

    app = prior.app if prior else new[0]["app"]
    xor_acc = prior.xor_acc if prior else 0
    for event in new:
        _check(event, app)
        xor_acc ^= event["ack_val"]

    latest = max(new, key=_last_order)
    if prior and (prior.last_event_at, prior.last_stage) > _last_order(latest):
        last_at, last_stage = prior.last_event_at, prior.last_stage
    else:
        last_at, last_stage = latest["event_time"], latest["stage"]

    fail_at, fail_reason, fail_stage = (
        (prior.fail_at, prior.fail_reason, prior.fail_stage) if prior else (None, None, None)
    )
    fails = [event for event in new if event["kind"] == FAIL]
    if fails:
        earliest = min(fails, key=_fail_order)
        if fail_at is None or _fail_order(earliest) < (fail_at, fail_stage, fail_reason or ""):
            fail_at, fail_reason, fail_stage = (
                earliest["event_time"],
                earliest["reason"],
                earliest["stage"],
            )

    first_at = min(event["event_time"] for event in new)
    return RootFold(
        root_id=root_id,
        app=app,
        xor_acc=xor_acc,
        event_count=(prior.event_count if prior else 0) + len(new),
        init_seen=(prior is not None and prior.init_seen) or any(e["kind"] == INIT for e in new),
        first_event_at=min(prior.first_event_at, first_at) if prior else first_at,
        last_event_at=last_at,
        last_stage=last_stage,
        fail_reason=fail_reason,
        fail_stage=fail_stage,
        fail_at=fail_at,
        seen_event_ids=frozenset(seen),
    )


def _check(event: Mapping[str, Any], app: str) -> None:
    if event["app"] != app:
        raise ValueError(
            f"root {event['root_id']} has events of two apps: {app!r} and {event['app']!r}"
        )
    if event["kind"] not in EVENT_KINDS:
        raise ValueError(f"event {event['event_id']} has unknown kind {event['kind']!r}")
    value = event["ack_val"]
    if isinstance(value, bool) or not isinstance(value, int) or not _I64_MIN <= value <= _I64_MAX:
        raise ValueError(f"event {event['event_id']} has ack_val {value!r}, not a signed bigint")


def classify(
    f: RootFold,
    *,
    now: datetime,
    timeout: timedelta,
    idle_timeout: timedelta | None = None,
    prior_status: str | None = None,
) -> str:
    """The status of a folded root at ``now``, given its status after the last run.

    In order: a completed root stays completed (its fold is final); a fail makes it
    ``failed``; a complete tree makes it ``completed`` (``completed_late`` after a replay or
    dead-lettering); a replayed or dead-lettered root keeps that status; a root older than
    ``timeout`` (and idle for ``idle_timeout``, if given) is ``timed_out``; else ``pending``.

    Example:
        >>> from datetime import datetime, timedelta, timezone
        >>> at = datetime(2024, 1, 1, tzinfo=timezone.utc)
        >>> f = RootFold(root_id=1, app="a", xor_acc=5, event_count=1, init_seen=True,
        ...              first_event_at=at, last_event_at=at, last_stage="spout")
        >>> classify(f, now=at + timedelta(minutes=1), timeout=timedelta(minutes=5))
        'pending'
        >>> classify(f, now=at + timedelta(minutes=6), timeout=timedelta(minutes=5))
        'timed_out'
        >>> classify(f, now=at, timeout=timedelta(minutes=5), prior_status="replayed")
        'replayed'
    """
    if prior_status is not None and prior_status not in status.ALL:
        raise ValueError(f"unknown prior_status {prior_status!r}; expected one of {status.ALL}")
    if prior_status in (status.COMPLETED, status.COMPLETED_LATE):
        # Storm forgets a completed tree: a stray or late event must not reopen it.
        return prior_status
    if f.failed:
        return prior_status if prior_status in status.SUPERSEDED else status.FAILED
    if f.complete:
        return status.COMPLETED_LATE if prior_status in status.SUPERSEDED else status.COMPLETED
    if prior_status in status.SUPERSEDED:
        return prior_status
    if now - f.first_event_at > timeout and (
        idle_timeout is None or now - f.last_event_at > idle_timeout
    ):
        return status.TIMED_OUT
    return status.PENDING
