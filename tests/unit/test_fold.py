"""fold and classify: the reference the Spark reconciler must match."""

from __future__ import annotations

import dataclasses
import doctest
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ackfold.ledger.schema import status
from ackfold.reconcile import fold as fold_module
from ackfold.reconcile.fold import RootFold, classify, fold

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
TIMEOUT = timedelta(minutes=10)


def ev(
    event_id: str,
    kind: str = "ack",
    ack_val: int = 0,
    *,
    root: int = 1,
    stage: str = "s",
    at: int = 0,
    reason: str | None = None,
    app: str = "orders",
) -> dict[str, Any]:
    """One ack_events row; `at` is seconds after T0."""
    return {
        "event_id": event_id,
        "app": app,
        "root_id": root,
        "kind": kind,
        "ack_val": ack_val,
        "stage": stage,
        "event_time": T0 + timedelta(seconds=at),
        "reason": reason,
    }


def rf(**changes: Any) -> RootFold:
    """A folded root, open by default (init seen, XOR not 0), first and last event at T0."""
    base = RootFold(
        root_id=1,
        app="orders",
        xor_acc=5,
        event_count=2,
        init_seen=True,
        first_event_at=T0,
        last_event_at=T0,
        last_stage="s",
    )
    return dataclasses.replace(base, **changes)


# ---- fold -------------------------------------------------------------------------------


def test_fold_xors_ack_vals_per_root() -> None:
    folds = fold(
        [
            ev("i1", "init", 6, root=1),
            ev("a1", "ack", 6, root=1),
            ev("i2", "init", 3, root=2),
        ]
    )
    assert (folds[1].xor_acc, folds[1].event_count, folds[1].complete) == (0, 2, True)
    assert (folds[2].xor_acc, folds[2].event_count, folds[2].complete) == (3, 1, False)


def test_fold_handles_signed_64_bit_values() -> None:
    low, high = -(1 << 63), (1 << 63) - 1
    folds = fold([ev("i", "init", low), ev("a", "ack", high)])
    assert folds[1].xor_acc == low ^ high == -1
    folds = fold([ev("b", "ack", -1)], prior=folds)
    assert folds[1].xor_acc == 0


def test_fold_drops_duplicates_within_one_input() -> None:
    folds = fold([ev("i", "init", 6), ev("a", "ack", 6), ev("a", "ack", 6)])
    assert (folds[1].xor_acc, folds[1].event_count) == (0, 2)


def test_fold_drops_events_already_folded_in_prior() -> None:
    first = fold([ev("i", "init", 6), ev("a", "ack", 6)])
    again = fold([ev("a", "ack", 6), ev("i", "init", 6)], prior=first)
    assert again == first


def test_fold_does_not_modify_prior() -> None:
    prior = fold([ev("i", "init", 6)])
    snapshot = dict(prior)
    fold([ev("a", "ack", 6)], prior=prior)
    assert prior == snapshot


def test_fold_keeps_roots_of_prior_without_new_events() -> None:
    prior = fold([ev("i", "init", 6, root=1)])
    folds = fold([ev("j", "init", 2, root=2)], prior=prior)
    assert folds[1] == prior[1]


def test_fold_in_one_run_or_many_is_the_same() -> None:
    events = [
        ev("i", "init", 7, at=0, stage="spout"),
        ev("a", "ack", 3, at=5, stage="parse"),
        ev("b", "ack", 4, at=2, stage="enrich"),
        ev("f", "fail", 0, at=3, stage="sink", reason="down"),
    ]
    whole = fold(events)
    for cut in range(len(events) + 1):
        assert fold(events[cut:], prior=fold(events[:cut])) == whole


def test_fold_times_and_last_stage_across_runs() -> None:
    prior = fold([ev("a", "ack", 1, at=10, stage="late"), ev("b", "ack", 2, at=5, stage="mid")])
    folds = fold([ev("i", "init", 3, at=0, stage="spout")], prior=prior)
    f = folds[1]
    assert (f.first_event_at, f.last_event_at) == (T0, T0 + timedelta(seconds=10))
    assert f.last_stage == "late"
    assert f.init_seen


def test_last_stage_ties_are_broken_by_stage() -> None:
    events = [ev("a", "ack", 1, at=5, stage="from-b"), ev("b", "ack", 2, at=5, stage="from-a")]
    assert fold(events)[1].last_stage == "from-b"
    assert fold(events[::-1])[1].last_stage == "from-b"
    assert fold(events[1:], prior=fold(events[:1]))[1].last_stage == "from-b"
    assert fold(events[:1], prior=fold(events[1:]))[1].last_stage == "from-b"


def test_fail_reason_comes_from_the_earliest_fail_even_when_it_arrives_later() -> None:
    later = ev("z", "fail", at=9, stage="sink", reason="second")
    earlier = ev("y", "fail", at=1, stage="parse", reason="first")
    folds = fold([earlier], prior=fold([later]))
    assert (folds[1].fail_reason, folds[1].fail_stage) == ("first", "parse")
    assert folds[1].fail_at == T0 + timedelta(seconds=1)
    assert folds[1].failed


def test_fail_ties_are_broken_by_stage_then_reason() -> None:
    b = ev("a", "fail", at=1, stage="stage-b", reason="a")
    a = ev("b", "fail", at=1, stage="stage-a", reason="b")
    for folds in (
        fold([a, b]),
        fold([b, a]),
        fold([a], prior=fold([b])),
        fold([b], prior=fold([a])),
    ):
        assert (folds[1].fail_reason, folds[1].fail_stage) == ("b", "stage-a")
    same_stage = ev("c", "fail", at=1, stage="stage-a", reason="a")
    for folds in (fold([a, same_stage]), fold([a], prior=fold([same_stage]))):
        assert folds[1].fail_reason == "a"


def test_of_copies_in_one_input_the_earliest_wins() -> None:
    late, early = ev("i", "init", 1, at=9, stage="spout"), ev("i", "init", 1, at=2, stage="spout")
    for events in ([late, early], [early, late]):
        f = fold(events)[1]
        assert (f.first_event_at, f.event_count) == (T0 + timedelta(seconds=2), 1)


def test_fold_without_a_fail_has_no_fail_fields() -> None:
    f = fold([ev("i", "init", 1)])[1]
    assert (f.failed, f.fail_reason, f.fail_stage, f.fail_at) == (False, None, None, None)


def test_seen_event_ids_grow_across_runs() -> None:
    folds = fold([ev("a", "ack", 1)], prior=fold([ev("i", "init", 1)]))
    assert folds[1].seen_event_ids == frozenset({"i", "a"})


def test_without_init_a_zero_xor_is_not_complete() -> None:
    folds = fold([ev("a", "ack", 6), ev("b", "ack", 6)])
    assert folds[1].xor_acc == 0
    assert not folds[1].complete


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"kind": "nack"}, "unknown kind"),
        ({"ack_val": 1 << 63}, "not a signed bigint"),
        ({"ack_val": None}, "not a signed bigint"),
        ({"app": "other"}, "two apps"),
    ],
)
def test_fold_refuses_rows_outside_the_contract(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fold([ev("i", "init", 1), {**ev("x"), **bad}])


# ---- classify ---------------------------------------------------------------------------


def test_classify_pending_before_the_timeout() -> None:
    assert classify(rf(), now=T0 + TIMEOUT, timeout=TIMEOUT) == status.PENDING


def test_classify_timed_out_strictly_after_the_timeout() -> None:
    late = T0 + TIMEOUT + timedelta(microseconds=1)
    assert classify(rf(), now=late, timeout=TIMEOUT) == status.TIMED_OUT


def test_classify_idle_timeout_spares_a_root_still_receiving_events() -> None:
    busy = rf(last_event_at=T0 + TIMEOUT)
    now = T0 + TIMEOUT + timedelta(minutes=1)
    idle = timedelta(minutes=5)
    assert classify(busy, now=now, timeout=TIMEOUT, idle_timeout=idle) == status.PENDING
    assert classify(busy, now=now, timeout=TIMEOUT) == status.TIMED_OUT
    quiet = now + idle
    assert classify(busy, now=quiet, timeout=TIMEOUT, idle_timeout=idle) == status.TIMED_OUT


def test_classify_completed() -> None:
    late = T0 + 10 * TIMEOUT
    assert classify(rf(xor_acc=0), now=late, timeout=TIMEOUT) == status.COMPLETED
    assert classify(rf(xor_acc=0), now=T0, timeout=TIMEOUT) == status.COMPLETED


def test_classify_zero_xor_without_init_is_not_completed() -> None:
    f = rf(xor_acc=0, init_seen=False)
    assert classify(f, now=T0, timeout=TIMEOUT) == status.PENDING


def test_classify_timed_out_root_that_completes_is_completed() -> None:
    f = rf(xor_acc=0)
    now = T0 + 2 * TIMEOUT
    assert classify(f, now=now, timeout=TIMEOUT, prior_status=status.TIMED_OUT) == status.COMPLETED


def test_classify_failed_beats_complete() -> None:
    f = rf(xor_acc=0, fail_reason="bad", fail_at=T0)
    assert classify(f, now=T0, timeout=TIMEOUT) == status.FAILED
    assert classify(f, now=T0, timeout=TIMEOUT, prior_status=status.TIMED_OUT) == status.FAILED


@pytest.mark.parametrize("prior", [status.REPLAYED, status.DEAD_LETTERED])
def test_classify_superseded_root_keeps_its_status(prior: str) -> None:
    now = T0 + 2 * TIMEOUT
    assert classify(rf(), now=now, timeout=TIMEOUT, prior_status=prior) == prior
    failed = rf(fail_reason="x", fail_at=T0)
    assert classify(failed, now=now, timeout=TIMEOUT, prior_status=prior) == prior


@pytest.mark.parametrize("prior", [status.REPLAYED, status.DEAD_LETTERED, status.COMPLETED_LATE])
def test_classify_completion_after_a_replay_is_completed_late(prior: str) -> None:
    f = rf(xor_acc=0)
    assert classify(f, now=T0, timeout=TIMEOUT, prior_status=prior) == status.COMPLETED_LATE


@pytest.mark.parametrize("prior", [status.COMPLETED, status.COMPLETED_LATE])
def test_classify_completed_root_stays_completed_whatever_arrives_later(prior: str) -> None:
    now = T0 + 2 * TIMEOUT
    stray = rf(xor_acc=99)
    late_fail = rf(xor_acc=0, fail_reason="rerun", fail_at=now)
    assert classify(stray, now=now, timeout=TIMEOUT, prior_status=prior) == prior
    assert classify(late_fail, now=now, timeout=TIMEOUT, prior_status=prior) == prior


def test_classify_refuses_unknown_prior_status() -> None:
    with pytest.raises(ValueError, match="unknown prior_status"):
        classify(rf(), now=T0, timeout=TIMEOUT, prior_status="done")


def test_status_sets() -> None:
    assert set(status.ALL) == {
        "pending",
        "completed",
        "failed",
        "timed_out",
        "replayed",
        "dead_lettered",
        "completed_late",
    }
    assert set(status.SETTLED) == {
        "completed",
        "completed_late",
        "failed",
        "replayed",
        "dead_lettered",
    }
    assert set(status.OPEN) == set(status.ALL) - set(status.SETTLED)


def test_docstring_examples_run() -> None:
    result = doctest.testmod(fold_module)
    assert result.attempted > 0
    assert result.failed == 0


def test_status_docstring_examples_run() -> None:
    result = doctest.testmod(status)
    assert result.attempted > 0
    assert result.failed == 0
