"""Random tuple DAGs for the property tests: trees, diamonds, multi-root aggregations, dup
anchoring, sinks' outputs (emitted to no stage), explicit fails and missing acks, over roots
of both id schemes, mixed in one tree.

A `Program` is a random DAG plus a fate for every delivery (ack, fail, or never processed).
`execute` runs it through a Tracker; `Model` recomputes roots, tuple ids and edges on its
own, from the formulas of `docs/decisions/ids-and-edges.md`, to check what the Tracker wrote.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ackfold.ledger.schema import ids, status
from ackfold.ledger.schema.schemes import EDGE_TAG, NUMERIC, SPOUT_TAG, STAGE_TAG, TEXT, TUPLE_TAG
from ackfold.ledger.schema.schemes import hash_numbers as numbers
from ackfold.reconcile.fold import RootFold, classify
from ackfold.track.tracker import Tracker
from ackfold.track.tuples import Tuple

APP = "prop"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
STAGES = ("a", "b")
# None: one unnamed consumer; otherwise the stages the tuple is delivered to (a diamond).
SPOUT_CONSUMERS: tuple[tuple[str, ...] | None, ...] = (None, ("a",), ("b",), ("a", "b"))
# A child may also go to no stage (`to=[]`): a sink's output, with no delivery to settle.
CONSUMERS = (*SPOUT_CONSUMERS, ())

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    database=None,  # write nothing into the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Delivery = tuple[int, str]  # (node index, consumer key)


@dataclass(frozen=True)
class Node:
    anchors: tuple[int, ...]  # indices of earlier nodes; () for a spout
    stage: str  # the stage that emits it (processing its anchors)
    to: tuple[str, ...] | None
    scheme: int = TEXT  # a spout's: its root's id scheme

    @property
    def consumers(self) -> tuple[str, ...]:
        return ("",) if self.to is None else self.to


@dataclass(frozen=True)
class Program:
    nodes: tuple[Node, ...]
    fates: dict[Delivery, str]  # "ack" | "fail" | "missing"
    order: tuple[Delivery, ...]  # the order deliveries are settled in
    unnamed_stage: dict[int, str]  # who acks an unnamed delivery (any stage may)

    def deliveries(self) -> list[Delivery]:
        return [(i, c) for i, n in enumerate(self.nodes) for c in n.consumers]


@st.composite
def programs(draw: st.DrawFn) -> Program:
    nodes: list[Node] = []
    for _ in range(draw(st.integers(1, 3))):
        scheme = draw(st.sampled_from((NUMERIC, TEXT)))
        nodes.append(Node((), "spout", draw(st.sampled_from(SPOUT_CONSUMERS)), scheme))
    for _ in range(draw(st.integers(0, 7))):
        stage = draw(st.sampled_from(STAGES))
        eligible = [i for i, n in enumerate(nodes) if n.to is None or stage in n.to]
        if not eligible:
            continue
        # Repeats allowed: anchoring one parent twice; several spouts: multi-root.
        anchors = draw(st.lists(st.sampled_from(eligible), min_size=1, max_size=3))
        nodes.append(Node(tuple(anchors), stage, draw(st.sampled_from(CONSUMERS))))
    deliveries = [(i, c) for i, n in enumerate(nodes) for c in n.consumers]
    if draw(st.booleans()):
        fates = dict.fromkeys(deliveries, "ack")
    else:
        # Mostly acks: 0-7 ack, 8 missing, 9 fail (shrinks towards all acked).
        pick = st.integers(0, 9).map(lambda k: "ack" if k < 8 else "missing" if k == 8 else "fail")
        fates = {d: draw(pick) for d in deliveries}
    order = tuple(draw(st.permutations(deliveries)))
    unnamed = {i: draw(st.sampled_from((*STAGES, "sink"))) for i in range(len(nodes))}
    return Program(tuple(nodes), fates, order, unnamed)


class Model:
    """What the Tracker should have done, recomputed from the program alone."""

    def __init__(self, program: Program) -> None:
        self.p = program
        self.roots: list[tuple[int, ...]] = []
        self.ids: list[int] = []
        # Text: hashes of the parts joined by \x1f; numeric: Spark's xxhash64 of the numbers.
        self.schemes: list[int] = []
        positions: Counter[tuple[str, tuple[int, ...]]] = Counter()
        for n in program.nodes:
            if not n.anchors:
                root = ids.root_id(APP, f"test::m{len(self.ids)}")
                self.roots.append((root,))
                self.schemes.append(n.scheme)
                numeric = n.scheme == NUMERIC
                self.ids.append(numbers(SPOUT_TAG, root) if numeric else ids.spout_tuple_id(root))
                continue
            anchor_ids = tuple(self.ids[a] for a in n.anchors)
            key = (n.stage, anchor_ids)
            scheme = min(self.schemes[a] for a in n.anchors)
            self.schemes.append(scheme)
            if scheme == NUMERIC:
                stage = numbers(STAGE_TAG, n.stage)
                self.ids.append(numbers(TUPLE_TAG, stage, positions[key], *anchor_ids))
            else:
                self.ids.append(ids.tuple_id(n.stage, positions[key], anchor_ids))
            positions[key] += 1
            self.roots.append(tuple(dict.fromkeys(r for a in n.anchors for r in self.roots[a])))

    def all_roots(self) -> list[int]:
        return [r for i, n in enumerate(self.p.nodes) if not n.anchors for r in self.roots[i]]

    def tree(self, root: int) -> list[int]:
        return [i for i, roots in enumerate(self.roots) if root in roots]

    def anchor_roots(self, i: int) -> list[tuple[int, ...]]:
        n = self.p.nodes[i]
        return [self.roots[a] for a in n.anchors] if n.anchors else [self.roots[i]]

    def edge(self, i: int, root: int, k: int, consumer: str) -> int:
        """Node i's edge in root's tree through anchor k to consumer. A numeric tuple of one
        root, through one anchor, to any one stage has one edge: its own id."""
        if self.schemes[i] == TEXT:
            return ids.edge_id(self.ids[i], root, k, consumer)
        short = self.anchor_roots(i) == [(root,)] and self.p.nodes[i].consumers == ("",)
        return self.ids[i] if short else numbers(EDGE_TAG, self.ids[i], root, k, consumer)

    def edges(self, i: int, root: int, consumer: str) -> list[int]:
        """Node i's edges in root's tree for one consumer: one per anchor reaching root."""
        return [
            self.edge(i, root, k, consumer)
            for k, roots in enumerate(self.anchor_roots(i))
            if root in roots
        ]

    def created_by(self, delivery: Delivery, root: int) -> list[int]:
        """Edges of the children emitted while processing `delivery`, in root's tree."""
        parent, key = delivery
        out = []
        for j, n in enumerate(self.p.nodes):
            for k, a in enumerate(n.anchors):
                parent_key = "" if self.p.nodes[a].to is None else n.stage
                if a == parent and parent_key == key and root in self.roots[a]:
                    out += [self.edge(j, root, k, c) for c in n.consumers]
        return out

    def expected_status(self, root: int) -> str:
        fates = [self.p.fates[(i, c)] for i in self.tree(root) for c in self.p.nodes[i].consumers]
        if "fail" in fates:
            return status.FAILED
        return status.COMPLETED if all(f == "ack" for f in fates) else status.PENDING


@dataclass
class Run:
    model: Model
    tuples: list[Tuple]
    events: list[dict[str, Any]]


def execute(program: Program, app: str = APP) -> Run:
    calls = 0

    def clock() -> datetime:
        nonlocal calls
        calls += 1
        return T0 + timedelta(seconds=calls // 2)  # some ties, to exercise tie-breaking

    tracker = Tracker(app, clock=clock)
    # A tracker registers roots in one scheme: the text roots come from one of their own.
    text = Tracker(app, clock=clock, id_scheme=TEXT)
    tuples: list[Tuple] = []
    for i, n in enumerate(program.nodes):
        if not n.anchors:
            spout = text if n.scheme == TEXT else tracker
            tuples.append(spout.spout(f"m{i}", to=n.to))
        else:
            tuples.append(tracker.emit([tuples[a] for a in n.anchors], stage=n.stage, to=n.to))
    # Every emit happens before any ack: children are emitted while their anchors are open.
    for i, c in program.order:
        stage = c or program.unnamed_stage[i]
        fate = program.fates[(i, c)]
        if fate == "ack":
            tracker.ack(tuples[i], stage=stage)
        elif fate == "fail":
            tracker.fail(tuples[i], stage=stage, reason=f"fail {i}")
    return Run(Model(program), tuples, text.drain() + tracker.drain())


def statuses(folds: dict[int, RootFold]) -> dict[int, str]:
    return {r: classify(f, now=T0, timeout=timedelta(days=1)) for r, f in folds.items()}


def event_of(event: dict[str, Any], t: Tuple) -> bool:
    return str(event["event_id"]) == ids.event_id(
        APP, event["root_id"], event["kind"], event["stage"], t.id
    )
