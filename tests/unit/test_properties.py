"""Properties over random tuple DAGs (`tests/unit/tuple_programs.py`): trees, diamonds,
multi-root aggregations, dup anchoring, explicit fails and missing acks, run through a
Tracker and checked against a model that recomputes roots, tuple ids and edges on its own.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from functools import reduce
from operator import xor

from hypothesis import given
from hypothesis import strategies as st

from ackfold.ledger.schema import status
from ackfold.reconcile.fold import RootFold, fold
from tests.unit.tuple_programs import SETTINGS, Program, event_of, execute, programs, statuses


@SETTINGS
@given(programs())
def test_tracker_ids_and_roots_match_the_model(program: Program) -> None:
    run = execute(program)
    assert [t.id for t in run.tuples] == run.model.ids
    assert [t.roots for t in run.tuples] == run.model.roots


@SETTINGS
@given(programs())
def test_a_root_completes_iff_every_delivery_in_its_tree_was_acked(program: Program) -> None:
    run = execute(program)
    result = statuses(fold(run.events))
    for root in run.model.all_roots():
        assert result[root] == run.model.expected_status(root)


@SETTINGS
@given(programs(), st.randoms(use_true_random=False), st.lists(st.integers(0, 1000), max_size=6))
def test_shuffling_and_splitting_into_runs_changes_nothing(
    program: Program, rnd: random.Random, cuts: list[int]
) -> None:
    run = execute(program)
    whole = fold(run.events)
    shuffled = list(run.events)
    rnd.shuffle(shuffled)
    bounds = sorted({c % (len(shuffled) + 1) for c in cuts} | {0, len(shuffled)})
    folds: dict[int, RootFold] = {}
    for lo, hi in itertools.pairwise(bounds):
        folds = fold(shuffled[lo:hi], prior=folds)
    assert folds == whole
    assert statuses(folds) == statuses(whole)


@SETTINGS
@given(
    programs(),
    st.randoms(use_true_random=False),
    st.lists(st.integers(0, 1000), max_size=10),
    st.lists(st.integers(0, 1000), max_size=4),
)
def test_duplicated_events_change_nothing(
    program: Program, rnd: random.Random, dups: list[int], cuts: list[int]
) -> None:
    run = execute(program)
    whole = fold(run.events)
    noisy = run.events + [dict(run.events[d % len(run.events)]) for d in dups]
    rnd.shuffle(noisy)
    # Duplicates may land in the same run or in a later one.
    bounds = sorted({c % (len(noisy) + 1) for c in cuts} | {0, len(noisy)})
    folds: dict[int, RootFold] = {}
    for lo, hi in itertools.pairwise(bounds):
        folds = fold(noisy[lo:hi], prior=folds)
    assert folds == whole


@SETTINGS
@given(programs())
def test_every_edge_enters_its_root_exactly_twice(program: Program) -> None:
    # Invariant 1, checked per event: each row's ack_val is exactly the XOR of the edges the
    # model says it carries; across a completed root's rows, each edge of its tree is
    # carried exactly twice (at creation and at its ack), and nothing else is.
    run = execute(program)
    m = run.model
    for root in m.all_roots():
        carried: Counter[int] = Counter()
        for e in (e for e in run.events if e["root_id"] == root):
            i = next(i for i, t in enumerate(run.tuples) if event_of(e, t))
            if e["kind"] == "init":
                contribution = [x for c in program.nodes[i].consumers for x in m.edges(i, root, c)]
            elif e["kind"] == "ack":
                key = "" if program.nodes[i].to is None else e["stage"]
                contribution = m.edges(i, root, key) + m.created_by((i, key), root)
            else:
                contribution = []
            assert e["ack_val"] == reduce(xor, contribution, 0)
            carried.update(contribution)
        if m.expected_status(root) == status.COMPLETED:
            tree_edges = [
                x
                for i in m.tree(root)
                for c in program.nodes[i].consumers
                for x in m.edges(i, root, c)
            ]
            assert len(set(tree_edges)) == len(tree_edges)
            assert carried == Counter({x: 2 for x in tree_edges})
        else:
            assert all(count <= 2 for count in carried.values())


@SETTINGS
@given(programs())
def test_no_proper_subset_of_a_completed_tree_xors_to_zero(program: Program) -> None:
    # Invariant 3 (and 2, 7): the tree cannot look complete before its last event is in.
    run = execute(program)
    for root in run.model.all_roots():
        if run.model.expected_status(root) != status.COMPLETED:
            continue
        vals = [e["ack_val"] for e in run.events if e["root_id"] == root]
        if len(vals) > 10:
            continue
        full = (1 << len(vals)) - 1
        for mask in range(1, full):
            acc = 0
            for k, v in enumerate(vals):
                if mask >> k & 1:
                    acc ^= v
            assert acc != 0, f"events {mask:b} of {len(vals)} XOR to 0"
