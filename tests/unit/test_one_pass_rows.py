"""The driver's side of the one pass (`ackfold.track.one_pass`): what the words' write
observed becomes the rows the plain-Python rules write, over random batches.

The observation holds, per acked input, its tuple id, its roots and its ack val per root
(three lists that line up), and one entry per failed input (tuple id, roots, reason).
`gathered_rows`, stamped and folded as `write_batch` does, must give `compact_acks`'s rows
(compact: copies of an input count once) or one per-tuple row per input and root with
`ids.event_id` (per tuple), and a fail row per failed input and root.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ackfold.ledger.schema import ids
from ackfold.track.compact import Ack, compact_acks
from ackfold.track.folding import stamp_and_fold
from ackfold.track.one_pass import gathered_rows

APP, STAGE = "wc", "split"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
KEY = ("event_id", "app", "root_id", "kind", "ack_val", "stage", "event_time", "reason")

inputs = st.lists(
    st.tuples(
        st.integers(-(2**63), 2**63 - 1),  # tuple id
        st.lists(st.integers(-3, 3), min_size=1, max_size=3, unique=True),  # its roots
        st.booleans(),  # failed
    ),
    max_size=30,
)


def observed(batch: list[tuple[int, list[int], bool]], rnd: random.Random) -> dict[str, Any]:
    """The observation of a batch, its inputs copied at random (a redelivered message):
    an ack val is a function of the input and root, as `ack(exploded=)` computes it."""
    acks, fails = [], []
    for tuple_id, roots, failed in batch:
        for _ in range(rnd.choice((1, 1, 2))):
            if failed:
                fails.append({"tuple_id": tuple_id, "roots": roots, "reason": "bad"})
            else:
                acks.append((tuple_id, roots, [hash((tuple_id, r)) % 2**63 for r in roots]))
    rnd.shuffle(acks)
    return {
        "ack_tuples": [tuple_id for tuple_id, _, _ in acks],
        "ack_roots": [roots for _, roots, _ in acks],
        "ack_vals": [vals for _, _, vals in acks],
        "fails": fails,
    }


def acked(metrics: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(tuple id, root, ack val) of every acked input and root the observation holds."""
    lists = (metrics["ack_tuples"], metrics["ack_roots"], metrics["ack_vals"])
    return [
        (tuple_id, root, val)
        for tuple_id, roots, vals in zip(*lists, strict=True)
        for root, val in zip(roots, vals, strict=True)
    ]


def failed_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """The fail events the observed fails must write: one per failed input and root."""
    return [
        {"event_id": ids.event_id(APP, root, "fail", STAGE, entry["tuple_id"]), "app": APP,
         "root_id": root, "kind": "fail", "ack_val": 0, "stage": STAGE, "event_time": T0,
         "reason": "bad"}
        for entry in metrics["fails"]
        for root in entry["roots"]
    ]  # fmt: skip


def keyed(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(row[k] for k in KEY) for row in rows)


@settings(deadline=None)  # the first example imports NumPy and pyarrow
@given(inputs, st.randoms(use_true_random=False))
def test_gathered_compact_rows_fold_as_compact_acks(
    batch: list[tuple[int, list[int], bool]], rnd: random.Random
) -> None:
    metrics = observed(batch, rnd)
    rows = gathered_rows(APP, STAGE, metrics, compact=True, fold_set=-1)
    written = stamp_and_fold(rows, now=T0, labels={-1: (APP, STAGE)}).to_pylist()

    acks = [Ack(root, STAGE, tuple_id, val, T0) for tuple_id, root, val in acked(metrics)]
    assert keyed(written) == keyed(compact_acks(APP, acks) + failed_rows(metrics))


@settings(deadline=None)  # the first example imports NumPy and pyarrow
@given(inputs, st.randoms(use_true_random=False))
def test_gathered_per_tuple_rows_are_one_per_input_and_root(
    batch: list[tuple[int, list[int], bool]], rnd: random.Random
) -> None:
    metrics = observed(batch, rnd)
    rows = gathered_rows(APP, STAGE, metrics, compact=False, fold_set=-1)
    written = stamp_and_fold(rows, now=T0).to_pylist()
    expected = [
        {
            "event_id": ids.event_id(APP, root, "ack", STAGE, tuple_id),
            "app": APP,
            "root_id": root,
            "kind": "ack",
            "ack_val": val,
            "stage": STAGE,
            "event_time": T0,
            "reason": None,
        }
        for tuple_id, root, val in acked(metrics)
    ] + failed_rows(metrics)
    # A copy of an input writes its row twice, same id: the fold reads it once.
    assert keyed(written) == keyed(expected)
