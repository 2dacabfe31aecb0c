"""Compact ack events against the per-tuple reference, over random tuple DAGs.

Each example runs a random program (`tests/unit/tuple_programs.py`) through a per-tuple
Tracker: the reference ledger, and the value of every delivery's ack. Then it writes the
same acks as an app would, in micro-batches: each acked delivery is processed in one
batch or, redelivered, in several; batches are re-run (their rows written twice), killed
(their rows never written), re-run with their input split differently (a fresh
checkpoint), and written compact or per tuple. A processing is deterministic: it emits
the same children each time (the condition of `docs/decisions/compact-events.md`).

- Safety, always: a root the compact ledger folds to `completed` is complete in the
  reference, over the deliveries whose acks were written; a failed root is failed in both.
- Equivalence, when every acked delivery lands in one processing (however the batches
  are cut, re-run or killed): the same statuses and the same XOR as the reference.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackfold.ledger.schema import ids, status
from ackfold.reconcile.fold import fold
from ackfold.track.compact import Ack, compact_acks
from ackfold.track.tracker import Tracker
from tests.unit.tuple_programs import (
    APP,
    SETTINGS,
    T0,
    Delivery,
    Program,
    Run,
    event_of,
    execute,
    programs,
    statuses,
)

Event = dict[str, Any]


def acks_by_delivery(program: Program, run: Run) -> dict[Delivery, list[Ack]]:
    """What processing each acked delivery writes, one `Ack` per root of its tuple."""
    found: dict[Delivery, list[Ack]] = {}
    for e in run.events:
        if e["kind"] != "ack":
            continue
        i = next(i for i, t in enumerate(run.tuples) if event_of(e, t))
        key = "" if program.nodes[i].to is None else e["stage"]
        ack = Ack(e["root_id"], e["stage"], run.tuples[i].id, e["ack_val"], e["event_time"])
        found.setdefault((i, key), []).append(ack)
    return found


def per_tuple_rows(acks: list[Ack]) -> list[Event]:
    """The rows a per-tuple stage writes for `acks` (one per tuple and root)."""
    return [
        {
            "event_id": ids.event_id(APP, a.root_id, "ack", a.stage, a.tuple_id),
            "app": APP,
            "root_id": a.root_id,
            "kind": "ack",
            "ack_val": a.ack_val,
            "stage": a.stage,
            "event_time": a.event_time,
            "reason": None,
        }
        for a in acks
    ]


@dataclass
class Schedule:
    """How an app processed the acked deliveries: which batches, and what became of them."""

    batches: list[list[Delivery]]
    killed: set[int] = field(default_factory=set)
    rerun: set[int] = field(default_factory=set)
    resplit: dict[int, int] = field(default_factory=dict)  # batch -> where its re-run splits
    per_tuple: set[int] = field(default_factory=set)

    def written(self) -> set[Delivery]:
        """The deliveries whose acks reached the ledger."""
        return {d for b, ds in enumerate(self.batches) if b not in self.killed for d in ds}

    def processed_once(self) -> bool:
        """Each written delivery in one batch, and no re-run split differently."""
        placed = [d for b, ds in enumerate(self.batches) if b not in self.killed for d in ds]
        return len(placed) == len(set(placed)) and not self.resplit


@st.composite
def schedules(draw: st.DrawFn, acked: list[Delivery], redeliver: bool) -> Schedule:
    n = draw(st.integers(1, 4))
    batches: list[list[Delivery]] = [[] for _ in range(n)]
    for d in acked:
        batches[draw(st.integers(0, n - 1))].append(d)
        if redeliver:
            # Delivered again, into any batch (the same one: a copy within the batch).
            for b in draw(st.lists(st.integers(0, n - 1), max_size=2)):
                batches[b].append(d)
    for ds in batches:
        draw(st.randoms(use_true_random=False)).shuffle(ds)
    pick = st.sets(st.integers(0, n - 1))
    resplit = {}
    if redeliver:
        resplit = {b: draw(st.integers(0, 1000)) for b in draw(pick)}
    return Schedule(batches, draw(pick), draw(pick), resplit, draw(pick))


def ledger_of(run: Run, acks: dict[Delivery, list[Ack]], schedule: Schedule) -> list[Event]:
    """The rows the app writes: inits and fails as they are, then each batch's acks."""
    rows = [e for e in run.events if e["kind"] != "ack"]

    def write(b: int, deliveries: list[Delivery]) -> list[Event]:
        batch = [a for d in deliveries for a in acks[d]]
        return per_tuple_rows(batch) if b in schedule.per_tuple else compact_acks(APP, batch)

    for b, deliveries in enumerate(schedule.batches):
        if b in schedule.killed:
            continue  # outputs written, then killed before its events: never re-run
        rows += write(b, deliveries)
        if b in schedule.rerun:
            rows += write(b, deliveries)  # a re-run that Delta's txn did not stop
        if b in schedule.resplit:
            cut = schedule.resplit[b] % (len(deliveries) + 1)
            rows += write(b, deliveries[:cut]) + write(b, deliveries[cut:])
    return rows


def reference(run: Run, acks: dict[Delivery, list[Ack]], written: set[Delivery]) -> list[Event]:
    """The per-tuple ledger of the same program, with only the written deliveries acked."""
    rows = [e for e in run.events if e["kind"] != "ack"]
    return rows + [row for d in sorted(written) for row in per_tuple_rows(acks[d])]


def folded(rows: list[Event], rnd: random.Random) -> dict[int, Any]:
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    return fold(shuffled)


@SETTINGS
@given(programs(), st.data())
def test_compact_events_never_complete_an_incomplete_tree(program: Program, data: Any) -> None:
    run = execute(program)
    acks = acks_by_delivery(program, run)
    schedule = data.draw(schedules(sorted(acks), redeliver=True))
    rnd = data.draw(st.randoms(use_true_random=False))
    got = statuses(folded(ledger_of(run, acks, schedule), rnd))
    want = statuses(fold(reference(run, acks, schedule.written())))
    for root in run.model.all_roots():
        if want[root] == status.FAILED:
            assert got[root] == status.FAILED
        if got[root] == status.COMPLETED:
            assert want[root] == status.COMPLETED, f"root {root} completed early"


@SETTINGS
@given(programs(), st.data())
def test_compact_events_fold_like_per_tuple_ones(program: Program, data: Any) -> None:
    run = execute(program)
    acks = acks_by_delivery(program, run)
    schedule = data.draw(schedules(sorted(acks), redeliver=False))
    assert schedule.processed_once()
    rnd = data.draw(st.randoms(use_true_random=False))
    got = folded(ledger_of(run, acks, schedule), rnd)
    want = fold(reference(run, acks, schedule.written()))
    assert statuses(got) == statuses(want)
    assert {r: f.xor_acc for r, f in got.items()} == {r: f.xor_acc for r, f in want.items()}
    if not schedule.killed and schedule.written() == set(acks):
        # Nothing lost: exactly the statuses of the program's own fates.
        assert statuses(got) == {r: run.model.expected_status(r) for r in got}


@SETTINGS
@given(programs(), st.data())
def test_a_whole_redelivered_batch_folds_like_one(program: Program, data: Any) -> None:
    # A message delivered twice whose tuples reach each stage together again (the SQS
    # redelivery of the word count): the second processing writes the same ids.
    run = execute(program)
    acks = acks_by_delivery(program, run)
    schedule = data.draw(schedules(sorted(acks), redeliver=False))
    again = data.draw(st.sets(st.integers(0, len(schedule.batches) - 1)))
    for b in sorted(again):
        if b in schedule.per_tuple:
            schedule.per_tuple.add(len(schedule.batches))  # the same stage, the same mode
        schedule.batches.append(list(schedule.batches[b]))
    rnd = data.draw(st.randoms(use_true_random=False))
    got = folded(ledger_of(run, acks, schedule), rnd)
    want = fold(reference(run, acks, schedule.written()))
    assert statuses(got) == statuses(want)


def test_a_stage_that_emits_other_children_on_a_second_processing_breaks_both_modes() -> None:
    # The condition of the argument is the contract's own: an event id says one thing, so
    # processing a tuple again emits the same children. Here tuple t is processed three
    # times, in three different sets of one micro-batch each, and emits child c in two of
    # them only (a stage that reads a clock or a service). Compact: c is created twice, so
    # the XOR needs no ack of c to reach 0. Per tuple: the three acks of t share one id,
    # and the fold keeps whichever comes first; if that one has no c, c is owed nothing.
    # Either way the tree completes with c never processed. Deterministic, neither does.
    def run(acks: str, processings: list[tuple[list[str], bool]]) -> str:
        spout = Tracker(APP, clock=lambda: T0)
        s = spout.spout("m-1")
        tuples = dict(zip("tuv", (spout.emit([s], stage="a") for _ in range(3)), strict=True))
        spout.ack(s, stage="a")
        rows = spout.drain()
        for together, emits_c in processings:
            batch = Tracker(APP, clock=lambda: T0, acks=acks)
            if emits_c:
                batch.emit([tuples["t"]], stage="b", position=0)
            for name in together:
                batch.ack(tuples[name], stage="b")
            rows += batch.drain()
        (root,) = s.roots
        return "complete" if fold(rows)[root].complete else "incomplete"

    flaky = [(["t", "u"], True), (["t"], True), (["t", "v"], False)]
    assert run("compact", flaky) == "complete"  # c was never acked
    assert run("per_tuple", flaky) == "incomplete"  # t's first ack, with c, was kept
    assert run("per_tuple", flaky[::-1]) == "complete"  # t's first ack had no c
    steady = [(["t", "u"], True), (["t"], True), (["t", "v"], True)]
    for acks in ("compact", "per_tuple"):
        assert run(acks, steady) == run(acks, steady[::-1]) == "incomplete"  # c is owed


def test_the_tracker_in_compact_mode_writes_one_ack_per_root_and_stage() -> None:
    tracker = Tracker(APP, clock=lambda: T0, acks="compact")
    sentence = tracker.spout("m-1")
    words = [tracker.emit([sentence], stage="split") for _ in range(4)]
    tracker.ack(sentence, stage="split")
    for word in words:
        tracker.ack(word, stage="count")
    rows = tracker.drain()
    assert [(r["kind"], r["stage"]) for r in rows] == [
        ("init", "spout"),
        ("ack", "split"),
        ("ack", "count"),
    ]
    (root,) = sentence.roots
    signature = ids.tuple_set_signature(w.id for w in words)
    assert rows[2]["event_id"] == ids.compact_event_id(APP, root, "count", 4, signature)
    # A set of one tuple is its per-tuple event, id for id.
    assert rows[1]["event_id"] == ids.event_id(APP, root, "ack", "split", sentence.id)
    f = fold(rows)[root]
    assert f.event_count == 3
    assert statuses({root: f}) == {root: status.COMPLETED}


def test_compact_acks_count_a_copy_once_and_keep_the_latest_time() -> None:
    later = T0 + timedelta(seconds=5)
    rows = compact_acks(
        APP,
        [Ack(1, "s", 10, 0b001, T0), Ack(1, "s", 10, 0b001, T0), Ack(1, "s", 11, 0b100, later)],
    )
    assert [(r["ack_val"], r["event_time"]) for r in rows] == [(0b101, later)]
    assert rows[0]["event_id"] == ids.compact_event_id(APP, 1, "s", 2, 10 ^ 11)


def test_an_unknown_ack_mode_names_the_choices() -> None:
    from ackfold.track.stage import StageTracker

    for make in (lambda: Tracker(APP, acks="batch"), lambda: StageTracker(APP, "s", acks="batch")):
        with pytest.raises(ValueError, match="acks must be 'compact' .* or 'per_tuple' .*'batch'"):
            make()


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # the ack call it came from, of one stage each
            st.integers(-3, 3),  # root
            st.integers(-(2**63), 2**63 - 1),  # tuple id
        ),
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_the_driver_folds_compact_acks_as_the_python_rule_does(
    acks: list[tuple[int, int, int]], rnd: random.Random
) -> None:
    """`folding.fold` (NumPy, what `write_batch` runs on the driver) writes the rows of
    `compact_acks`, one call at a time: copies of an input count once, and the batch's
    other events pass as they are."""
    import pyarrow as pa

    from ackfold.track.folding import FOLD_SET, TUPLE_ID, fold

    stages = ("split", "count", "split")  # two calls of one stage are two sets
    value = {t: rnd.getrandbits(64) - 2**63 for _, _, t in acks}  # a function of the tuple
    rows = [
        {"event_id": None, "app": APP, "root_id": root, "kind": "ack", "ack_val": value[t],
         "stage": stages[call], "event_time": T0, "reason": None, TUPLE_ID: t, FOLD_SET: call}
        for call, root, t in acks
    ]  # fmt: skip
    other = {"event_id": "e-1", "app": APP, "root_id": 1, "kind": "fail", "ack_val": 0,
             "stage": "split", "event_time": T0, "reason": "bad"}  # fmt: skip
    rnd.shuffle(rows)
    schema = pa.schema([
        ("event_id", pa.string()), ("app", pa.string()), ("root_id", pa.int64()),
        ("kind", pa.string()), ("ack_val", pa.int64()), ("stage", pa.string()),
        ("event_time", pa.timestamp("us", tz="UTC")), ("reason", pa.string()),
        (TUPLE_ID, pa.int64()), (FOLD_SET, pa.int32()),
    ])  # fmt: skip
    folded = fold(pa.Table.from_pylist([other, *rows], schema)).to_pylist()

    expected = [other]
    for call in sorted({call for call, _, _ in acks}):
        mine = [Ack(root, stages[call], t, value[t], T0) for c, root, t in acks if c == call]
        expected += compact_acks(APP, mine)
    assert sorted(map(_row_key, folded)) == sorted(map(_row_key, expected))

    # As `collect` sends them: the rows of a set carry only numbers, its labels the names.
    numbers = [{**row, "app": None, "kind": None, "stage": None} for row in rows]
    labels = {call: (APP, stages[call]) for call in range(len(stages))}
    narrow = fold(pa.Table.from_pylist([other, *numbers], schema), labels=labels).to_pylist()
    assert sorted(map(_row_key, narrow)) == sorted(map(_row_key, expected))


def _row_key(row: Event) -> tuple[Any, ...]:
    return tuple(row[k] for k in ("event_id", "app", "root_id", "kind", "ack_val", "stage",
                                  "event_time", "reason"))  # fmt: skip
