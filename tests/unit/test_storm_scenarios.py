"""Storm's acking integration scenarios, replayed with Tracker and checked through fold + classify.

Each test mirrors one of Storm's topology integration tests (testAcking, testAckBranching,
testAckingSelfAnchor, testTimeout): the bolts are plain functions over a Tracker, the spout
"acks" of Storm become root statuses computed from the ledger rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from ackfold.ledger.schema import status
from ackfold.reconcile.fold import RootFold, classify, fold
from ackfold.track.tracker import Tracker
from ackfold.track.tuples import Tuple

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
TIMEOUT = timedelta(seconds=10)


class Cluster:
    """A tracker with a simulated clock and a reconciler over everything it wrote."""

    def __init__(self) -> None:
        self.now = T0
        self.tracker = Tracker("storm", clock=lambda: self.now)
        self.folds: dict[int, RootFold] = {}
        self.statuses: dict[int, str] = {}

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def reconcile(self, **kwargs: Any) -> dict[int, str]:
        self.folds = fold(self.tracker.drain(), prior=self.folds)
        self.statuses = {
            root: classify(
                f, now=self.now, timeout=TIMEOUT, prior_status=self.statuses.get(root), **kwargs
            )
            for root, f in self.folds.items()
        }
        return self.statuses

    def status(self, t: Tuple) -> str:
        (root,) = t.roots
        return self.reconcile()[root]


def branching(c: Cluster, stage: str, n: int) -> Callable[[Tuple], list[Tuple]]:
    """Storm's BranchingBolt: emit n children anchored to the input, then ack it."""

    def execute(t: Tuple) -> list[Tuple]:
        children = [c.tracker.emit([t], stage=stage) for _ in range(n)]
        c.tracker.ack(t, stage=stage)
        return children

    return execute


def acker(c: Cluster, stage: str) -> Callable[[Tuple], list[Tuple]]:
    """Storm's AckBolt: ack and emit nothing."""

    def execute(t: Tuple) -> list[Tuple]:
        c.tracker.ack(t, stage=stage)
        return []

    return execute


class Agg:
    """Storm's AggBolt: buffer inputs (of any roots); every n, emit one tuple anchored to
    all of them and ack them."""

    def __init__(self, c: Cluster, stage: str, n: int) -> None:
        self.c, self.stage, self.n = c, stage, n
        self.buffer: list[Tuple] = []
        self.emitted: list[Tuple] = []

    def __call__(self, t: Tuple) -> list[Tuple]:
        self.buffer.append(t)
        if len(self.buffer) < self.n:
            return []
        batch, self.buffer = self.buffer, []
        out = self.c.tracker.emit(batch, stage=self.stage)
        self.emitted.append(out)
        for anchor in batch:
            self.c.tracker.ack(anchor, stage=self.stage)
        return [out]


def run(t: Tuple, *bolts: Callable[[Tuple], list[Tuple]]) -> None:
    """Push t through a linear chain of bolts, depth first."""
    if not bolts:
        return
    for child in bolts[0](t):
        run(child, *bolts[1:])


def test_acking_with_aggregation_across_roots() -> None:
    # Storm testAcking: spouts 1, 2, 3 -> branching 2, 4, 1 -> one aggregator of 3 tuples
    # (across roots) -> branching 2 -> ack. A root completes once every tuple it reached
    # went through an aggregate that was fully processed downstream.
    c = Cluster()
    agg = Agg(c, "7", 3)
    tail = (agg, branching(c, "8", 2), acker(c, "9"))
    fanout = {"1": branching(c, "4", 2), "2": branching(c, "5", 4), "3": branching(c, "6", 1)}
    fed = 0

    def feed(spout: str) -> Tuple:
        nonlocal fed
        fed += 1
        t = c.tracker.spout(f"msg-{fed}", stage=spout, source=f"feeder{spout}")
        run(t, fanout[spout], *tail)
        return t

    a = feed("1")  # 2 tuples wait in the aggregator
    assert c.status(a) == status.PENDING
    b = feed("2")  # 2 + 4 = two full aggregates
    assert (c.status(a), c.status(b)) == (status.COMPLETED, status.COMPLETED)
    d = feed("1")  # 2 wait
    assert c.status(d) == status.PENDING
    e = feed("1")  # d, d, e aggregate; one e waits
    assert (c.status(d), c.status(e)) == (status.COMPLETED, status.PENDING)
    f = feed("3")  # e, f wait
    assert (c.status(e), c.status(f)) == (status.PENDING, status.PENDING)
    g = feed("2")  # e, f, g and g, g, g aggregate
    assert [c.status(t) for t in (e, f, g)] == [status.COMPLETED] * 3

    # The aggregates really spanned roots, as in Storm.
    assert [out.roots for out in agg.emitted[:2]] == [a.roots + b.roots, b.roots]
    assert agg.emitted[3].roots == e.roots + f.roots + g.roots


def test_branching_diamond_into_an_aggregator() -> None:
    # Storm testAckBranching: spout -> identity bolts 2 and 3 (both subscribe: a diamond)
    # -> aggregator of 4 -> sink. One message gives the aggregator only 2 tuples.
    c = Cluster()
    agg = Agg(c, "4", 4)
    sink = acker(c, "sink")

    def identity(stage: str) -> Callable[[Tuple], list[Tuple]]:
        def execute(t: Tuple) -> list[Tuple]:
            out = c.tracker.emit([t], stage=stage)
            c.tracker.ack(t, stage=stage)
            return [out]

        return execute

    def feed(message: str) -> Tuple:
        t = c.tracker.spout(message, stage="1", to=["2", "3"])
        for stage in ("2", "3"):
            run(t, identity(stage), agg, sink)
        return t

    first = feed("m-1")
    assert c.status(first) == status.PENDING
    second = feed("m-2")
    assert (c.status(first), c.status(second)) == (status.COMPLETED, status.COMPLETED)


def test_diamond_with_one_branch_missing_never_completes() -> None:
    # The same diamond where bolt 3 never processes its copy: the root times out, as in
    # Storm where the spout tuple would never be acked.
    c = Cluster()
    t = c.tracker.spout("m-1", stage="1", to=["2", "3"])
    child = c.tracker.emit([t], stage="2")
    c.tracker.ack(t, stage="2")
    c.tracker.ack(child, stage="sink")
    assert c.status(t) == status.PENDING
    c.advance(11)
    assert c.status(t) == status.TIMED_OUT


def test_acking_self_anchor() -> None:
    # Storm testAckingSelfAnchor: a bolt emits one tuple anchored twice to its input, then
    # acks it; a second bolt acks that tuple. With derived ids, this is where a naive scheme
    # cancels the child out: the root must stay open until the second bolt acks.
    c = Cluster()

    def dup_anchor(t: Tuple) -> list[Tuple]:
        out = c.tracker.emit([t, t], stage="2")
        c.tracker.ack(t, stage="2")
        return [out]

    first = c.tracker.spout("m-1", stage="1")
    (child,) = dup_anchor(first)
    assert c.status(first) == status.PENDING
    c.tracker.ack(child, stage="3")
    assert c.status(first) == status.COMPLETED

    others = [c.tracker.spout(f"m-{i}", stage="1") for i in (2, 3, 4)]
    for t in others:
        run(t, dup_anchor, acker(c, "3"))
    assert [c.status(t) for t in others] == [status.COMPLETED] * 3


def test_timeout_with_every_other_tuple_acked() -> None:
    # Storm testTimeout: a bolt acks every other tuple; with a 10 s timeout the unacked
    # one is still pending after 9 s and times out after 21 s, the others completed.
    c = Cluster()
    seen = 0

    def ack_every_other(t: Tuple) -> list[Tuple]:
        nonlocal seen
        seen += 1
        if seen % 2 == 1:
            c.tracker.ack(t, stage="2")
        return []

    c.advance(11)
    tuples = [c.tracker.spout(m, stage="1") for m in ("a", "b", "c")]
    for t in tuples:
        run(t, ack_every_other)
    c.advance(9)
    assert [c.status(t) for t in tuples] == [status.COMPLETED, status.PENDING, status.COMPLETED]
    c.advance(12)
    assert [c.status(t) for t in tuples] == [status.COMPLETED, status.TIMED_OUT, status.COMPLETED]


def test_idle_timeout_spares_a_root_that_keeps_making_progress() -> None:
    # Storm's resetTimeout keeps a slow tuple alive; ackfold's idle_timeout does the same
    # for a root whose tree keeps writing events.
    c = Cluster()
    t = c.tracker.spout("slow", stage="1")
    current = t
    for _ in range(3):
        c.advance(8)
        (current,) = branching(c, "step", 1)(current)
    c.reconcile(idle_timeout=TIMEOUT)
    assert c.statuses[t.roots[0]] == status.PENDING  # 24 s old, last event 0 s ago
    c.advance(11)
    c.reconcile(idle_timeout=TIMEOUT)
    assert c.statuses[t.roots[0]] == status.TIMED_OUT
    c.tracker.ack(current, stage="sink")
    c.reconcile(idle_timeout=TIMEOUT)
    assert c.statuses[t.roots[0]] == status.COMPLETED


def test_explicit_fail_fails_the_root_with_its_reason() -> None:
    # Storm's collector.fail: the spout sees the failure without waiting for the timeout.
    c = Cluster()
    t = c.tracker.spout("m-1", stage="1")
    children = branching(c, "2", 3)(t)
    c.tracker.ack(children[0], stage="3")
    c.tracker.fail(children[1], stage="3", reason="cannot parse")
    c.tracker.ack(children[2], stage="3")
    assert c.status(t) == status.FAILED
    assert (c.folds[t.roots[0]].fail_stage, c.folds[t.roots[0]].fail_reason) == (
        "3",
        "cannot parse",
    )
