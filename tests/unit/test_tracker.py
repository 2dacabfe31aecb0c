"""Tracker: the rows it writes, the edge scheme (invariants 2, 7, 8) and its errors."""

from __future__ import annotations

import doctest
import re
from datetime import UTC, datetime, timedelta, timezone
from types import ModuleType
from typing import Any

import pytest

from ackfold.ledger.schema import ids, schemes
from ackfold.ledger.schema.schemes import NUMERIC, TEXT
from ackfold.reconcile.fold import fold
from ackfold.track import tracker, tuples
from ackfold.track.tracker import Tracker, TrackingError
from ackfold.track.tuples import Tuple

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)

EVENT_COLUMNS = ["event_id", "app", "root_id", "kind", "ack_val", "stage", "event_time", "reason"]
ROOT_COLUMNS = [
    "root_id",
    "app",
    "attempt",
    "origin_root_id",
    "source",
    "source_queue",
    "source_message_id",
    "source_position",
    "payload",
    "ingested_at",
    "id_scheme",
]


class Clock:
    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


class Ledger:
    """Everything a tracker wrote so far, folded on demand."""

    def __init__(self, t: Tracker) -> None:
        self.tracker = t
        self.events: list[dict[str, Any]] = []

    def complete(self, root: int) -> bool:
        self.events += self.tracker.drain()
        folds = fold(self.events)
        return root in folds and folds[root].complete


def _root(t: Tuple) -> int:
    assert len(t.roots) == 1
    return t.roots[0]


def test_chain_completes_only_after_the_last_ack() -> None:
    tr = Tracker("orders", clock=Clock())
    ledger = Ledger(tr)
    order = tr.spout("m-1")
    line = tr.emit([order], stage="split")
    assert not ledger.complete(_root(order))
    tr.ack(order, stage="split")
    assert not ledger.complete(_root(order))
    tr.ack(line, stage="sink")
    assert ledger.complete(_root(order))


def test_emit_writes_no_event_until_the_anchor_is_acked() -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout("m-1")
    tr.drain()
    tr.emit([order], stage="split")
    tr.emit([order], stage="split")
    assert tr.drain() == []
    tr.ack(order, stage="split")
    (row,) = tr.drain()
    assert row["kind"] == "ack"


def test_ack_row_carries_the_acked_edge_and_the_children_edges() -> None:
    tr = Tracker("orders", clock=Clock(), id_scheme=TEXT)
    order = tr.spout("m-1")
    r = _root(order)
    a = tr.emit([order], stage="split")
    b = tr.emit([order], stage="split")
    tr.ack(order, stage="split")
    init, ack = tr.drain()
    assert init["ack_val"] == ids.edge_id(order.id, r, 0, "")
    assert ack["ack_val"] == (
        ids.edge_id(order.id, r, 0, "") ^ ids.edge_id(a.id, r, 0, "") ^ ids.edge_id(b.id, r, 0, "")
    )


def test_numeric_ids_hash_numbers_and_a_short_tuples_edge_is_its_id() -> None:
    tr = Tracker("orders", clock=Clock())  # numeric: the default for new roots
    order = tr.spout("m-1")
    r = _root(order)
    assert (order.scheme, tr.drain_roots()[0]["id_scheme"]) == (NUMERIC, NUMERIC)
    assert order.id == schemes.hash_numbers(schemes.SPOUT_TAG, r)
    a = tr.emit([order], stage="split")
    stage = schemes.hash_numbers(schemes.STAGE_TAG, "split")
    assert a.id == schemes.hash_numbers(schemes.TUPLE_TAG, stage, 0, order.id)
    both = tr.emit([order, a], stage="join", to=["sink"])
    tr.ack(order, stage="split")
    init, ack = tr.drain()
    # One root, one anchor, any one stage: the tuple is its own edge.
    assert init["ack_val"] == order.id
    join_edges = [schemes.hash_numbers(schemes.EDGE_TAG, both.id, r, 0, "sink")]
    assert ack["ack_val"] == order.id ^ a.id ^ join_edges[0]


def test_a_child_takes_the_lowest_scheme_of_its_anchors() -> None:
    old, new = Tracker("orders", id_scheme=TEXT), Tracker("orders")
    a, b = old.spout("a"), new.spout("b")
    assert (a.scheme, b.scheme) == (TEXT, NUMERIC)
    assert new.emit([b], stage="s").scheme == NUMERIC
    mixed = new.emit([a, b], stage="s")
    assert mixed.scheme == TEXT
    assert mixed.id == ids.tuple_id("s", 0, [a.id, b.id])
    with pytest.raises(ValueError, match="id_scheme must be 1"):
        Tracker("orders", id_scheme=3)


def test_multi_anchoring_joins_two_branches_of_one_root() -> None:
    tr = Tracker("orders", clock=Clock())
    ledger = Ledger(tr)
    order = tr.spout("m-1")
    r = _root(order)
    left = tr.emit([order], stage="split")
    right = tr.emit([order], stage="split")
    tr.ack(order, stage="split")
    joined = tr.emit([left, right], stage="join")
    assert joined.roots == (r,)
    assert joined.anchor_roots == (frozenset({r}), frozenset({r}))
    tr.ack(left, stage="join")
    tr.ack(right, stage="join")
    assert not ledger.complete(r)
    tr.ack(joined, stage="sink")
    assert ledger.complete(r)


def test_anchoring_the_same_parent_twice_keeps_the_root_open_until_the_child_is_acked() -> None:
    tr = Tracker("orders", clock=Clock(), id_scheme=TEXT)
    ledger = Ledger(tr)
    order = tr.spout("m-1")
    r = _root(order)
    child = tr.emit([order, order], stage="dup")
    tr.ack(order, stage="dup")

    # A naive edge without the anchor index would enter the parent's ack twice and cancel:
    # init XOR parent ack would be 0, and the root would look complete right now.
    naive_child = ids.hash64("edge", child.id, r, "")
    naive_order = ids.hash64("edge", order.id, r, "")
    naive_acc = naive_order ^ (naive_order ^ naive_child ^ naive_child)
    assert naive_acc == 0

    assert not ledger.complete(r)
    tr.ack(child, stage="sink")
    (child_ack,) = tr.drain()
    assert child_ack["ack_val"] == ids.edge_id(child.id, r, 0, "") ^ ids.edge_id(child.id, r, 1, "")
    ledger.events.append(child_ack)
    assert ledger.complete(r)


def test_aggregation_across_roots_belongs_to_every_root() -> None:
    tr = Tracker("orders", clock=Clock(), id_scheme=TEXT)
    ledger = Ledger(tr)
    spouts = [tr.spout(f"m-{i}") for i in range(3)]
    roots = [_root(t) for t in spouts]
    total = tr.emit(spouts, stage="sum")
    assert total.roots == tuple(roots)
    for t in spouts:
        tr.ack(t, stage="sum")
    assert not any(ledger.complete(r) for r in roots)
    tr.ack(total, stage="sink")
    rows = tr.drain()
    # One ack row per root, each with only that root's edge.
    assert [row["root_id"] for row in rows] == roots
    assert len({row["event_id"] for row in rows}) == 3
    for k, row in enumerate(rows):
        assert row["ack_val"] == ids.edge_id(total.id, roots[k], k, "")
    ledger.events += rows
    assert all(ledger.complete(r) for r in roots)


def test_multi_root_roots_are_the_union_in_first_seen_order() -> None:
    tr = Tracker("orders", clock=Clock())
    a, b, c = (tr.spout(m) for m in ("a", "b", "c"))
    ab = tr.emit([a, b], stage="pair")
    mixed = tr.emit([c, ab, a], stage="mix")
    assert mixed.roots == (_root(c), _root(a), _root(b))
    assert mixed.anchor_roots == (
        frozenset({_root(c)}),
        frozenset({_root(a), _root(b)}),
        frozenset({_root(a)}),
    )


def test_multi_root_child_of_a_root_anchored_twice_completes_every_root() -> None:
    tr = Tracker("orders", clock=Clock())
    ledger = Ledger(tr)
    a, b = tr.spout("a"), tr.spout("b")
    ab = tr.emit([a, b], stage="pair")
    tr.ack(a, stage="pair")
    tr.ack(b, stage="pair")
    # Root a reaches `mixed` through anchors 0 and 1: two edges in a's tree.
    mixed = tr.emit([ab, ab], stage="mix")
    tr.ack(ab, stage="mix")
    assert not ledger.complete(_root(a))
    assert not ledger.complete(_root(b))
    tr.ack(mixed, stage="sink")
    assert ledger.complete(_root(a))
    assert ledger.complete(_root(b))


def test_diamond_needs_an_ack_from_every_consumer() -> None:
    tr = Tracker("clicks", clock=Clock())
    ledger = Ledger(tr)
    click = tr.spout("c-1", to=["left", "right"])
    r = _root(click)
    left = tr.emit([click], stage="left")
    right = tr.emit([click], stage="right")
    tr.ack(click, stage="left")
    tr.ack(left, stage="sink")
    tr.ack(right, stage="sink")
    # `right` still owes its ack of the click, which carries the creation of `right`.
    assert not ledger.complete(r)
    tr.ack(click, stage="right")
    assert ledger.complete(r)


def test_diamond_init_holds_one_edge_per_consumer() -> None:
    tr = Tracker("clicks", clock=Clock(), id_scheme=TEXT)
    click = tr.spout("c-1", to=["left", "right"])
    r = _root(click)
    (init,) = tr.drain()
    assert init["ack_val"] == ids.edge_id(click.id, r, 0, "left") ^ ids.edge_id(
        click.id, r, 0, "right"
    )


def test_child_delivered_to_two_stages_is_acked_by_each() -> None:
    tr = Tracker("clicks", clock=Clock())
    ledger = Ledger(tr)
    click = tr.spout("c-1")
    session = tr.emit([click], stage="sessionize", to=["store", "count"])
    assert session.consumers == ("store", "count")
    tr.ack(click, stage="sessionize")
    tr.ack(session, stage="store")
    assert not ledger.complete(_root(click))
    tr.ack(session, stage="count")
    assert ledger.complete(_root(click))
    rows = [e for e in ledger.events if e["kind"] == "ack" and e["stage"] in ("store", "count")]
    assert len({row["event_id"] for row in rows}) == 2


def test_a_second_consumer_may_emit_after_the_first_acked() -> None:
    tr = Tracker("clicks", clock=Clock())
    click = tr.spout("c-1", to=["left", "right"])
    tr.ack(click, stage="left")
    right = tr.emit([click], stage="right")
    assert right.roots == click.roots


def test_emit_after_ack_names_the_tuple_and_stage() -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout("m-1")
    tr.ack(order, stage="split")
    with pytest.raises(TrackingError, match=r"stage 'split' cannot emit anchored to Tuple\(0x"):
        tr.emit([order], stage="split")


def test_emit_after_fail_is_refused() -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout("m-1")
    tr.fail(order, stage="split", reason="bad json")
    with pytest.raises(TrackingError, match="already failed by 'split'"):
        tr.emit([order], stage="split")


def test_double_ack_is_refused() -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout("m-1")
    tr.ack(order, stage="split")
    with pytest.raises(TrackingError, match="already acked by 'split'"):
        tr.ack(order, stage="split")
    # The unnamed consumer is one delivery, whichever stage tries the second ack.
    with pytest.raises(TrackingError, match="already acked by 'split'"):
        tr.ack(order, stage="other")


def test_ack_after_fail_and_fail_after_ack_are_refused() -> None:
    tr = Tracker("orders", clock=Clock())
    a, b = tr.spout("a"), tr.spout("b")
    tr.fail(a, stage="s", reason="boom")
    with pytest.raises(TrackingError):
        tr.ack(a, stage="s")
    tr.ack(b, stage="s")
    with pytest.raises(TrackingError):
        tr.fail(b, stage="s", reason="boom")


def test_wrong_consumer_is_refused() -> None:
    tr = Tracker("clicks", clock=Clock())
    click = tr.spout("c-1", to=["left", "right"])
    with pytest.raises(ValueError, match="stage 'middle' is not a consumer of tuple"):
        tr.ack(click, stage="middle")
    with pytest.raises(ValueError, match="stage 'middle' is not a consumer of tuple"):
        tr.emit([click], stage="middle")
    with pytest.raises(ValueError, match="stage 'middle' is not a consumer of tuple"):
        tr.fail(click, stage="middle", reason="x")


def test_empty_anchors_are_refused() -> None:
    tr = Tracker("orders", clock=Clock())
    with pytest.raises(ValueError, match="unanchored"):
        tr.emit([], stage="split")


@pytest.mark.parametrize("reason", ["", "   ", None])
def test_fail_needs_a_reason(reason: Any) -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout("m-1")
    with pytest.raises(ValueError, match="non-empty reason"):
        tr.fail(order, stage="split", reason=reason)
    tr.ack(order, stage="split")  # the refused fail did not settle the delivery


@pytest.mark.parametrize("to", ["left", ["a", "a"], ["a", ""]])
def test_bad_consumer_lists_are_refused(to: Any) -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout("m-1")
    with pytest.raises(ValueError):
        tr.emit([order], stage="split", to=to)
    with pytest.raises(ValueError):
        tr.spout("m-2", to=to)


# -- sinks: an output that no stage consumes keeps no tree open (invariant 12) --------------


def two_jobs(tr: Tracker, final_to: list[str] | None) -> tuple[Tuple, Tuple, Tuple]:
    """Job 1 splits two sentences into words; job 2 counts the word both share, anchored
    to both roots' words, and acks the words: its count goes `final_to`."""
    first, second = tr.spout("m-1", source="sqs"), tr.spout("m-2", source="sqs")
    words = [tr.emit([s], stage="split") for s in (first, second)]
    tr.ack(first, stage="split")
    tr.ack(second, stage="split")
    count = tr.emit(sorted(words, key=lambda w: w.id), stage="count", to=final_to)
    for word in words:
        tr.ack(word, stage="count")
    return first, second, count


def test_a_sinks_output_keeps_no_tree_open() -> None:
    tr = Tracker("wordcount", clock=Clock())
    ledger = Ledger(tr)
    first, second, count = two_jobs(tr, final_to=[])
    assert count.consumers == ()
    assert count.roots == first.roots + second.roots
    assert ledger.complete(_root(first))
    assert ledger.complete(_root(second))


def test_a_final_output_emitted_for_a_consumer_that_never_comes_stays_pending() -> None:
    # The trap `to=[]` closes: the default `to` owes the count's edge to some stage.
    tr = Tracker("wordcount", clock=Clock())
    ledger = Ledger(tr)
    first, second, count = two_jobs(tr, final_to=None)
    assert not ledger.complete(_root(first))
    assert not ledger.complete(_root(second))
    tr.ack(count, stage="store")
    assert ledger.complete(_root(first))
    assert ledger.complete(_root(second))


@pytest.mark.parametrize("acks", ["per_tuple", "compact"])
def test_a_sinks_output_changes_no_ack_row(acks: str) -> None:
    # The anchor's ack carries its own edge only: the same row as a sink that emits nothing.
    def acks_of(emit_sink: bool) -> list[dict[str, Any]]:
        tr = Tracker("orders", clock=Clock(), acks=acks)
        order = tr.spout("m-1")
        if emit_sink:
            tr.emit([order], stage="store", to=[])
        tr.ack(order, stage="store")
        return tr.drain()

    assert acks_of(emit_sink=True) == acks_of(emit_sink=False)


def test_a_sinks_output_cannot_be_acked_failed_or_anchored() -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout("m-1")
    total = tr.emit([order], stage="store", to=[])
    refused = re.escape("stage 'audit' cannot process tuple Tuple(") + ".*emitted to=\\[\\]"
    with pytest.raises(ValueError, match=refused):
        tr.ack(total, stage="audit")
    with pytest.raises(ValueError, match=refused):
        tr.fail(total, stage="audit", reason="late")
    with pytest.raises(ValueError, match="emit it with to=None or to=\\[that stage\\]"):
        tr.emit([total], stage="audit")
    tr.ack(order, stage="store")  # the refusals settled nothing


def test_a_spout_cannot_send_to_no_stage() -> None:
    tr = Tracker("orders", clock=Clock())
    with pytest.raises(ValueError, match="the root would complete at once, unprocessed"):
        tr.spout("m-1", to=[])
    assert tr.drain() == []
    assert tr.drain_roots() == []


@pytest.mark.parametrize("stage", ["", "a\x1fb"])
def test_bad_stage_names_are_refused(stage: str) -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout("m-1")
    with pytest.raises(ValueError):
        tr.emit([order], stage=stage)
    with pytest.raises(ValueError):
        tr.ack(order, stage=stage)


def test_default_positions_count_per_stage_and_anchors() -> None:
    tr = Tracker("orders", clock=Clock(), id_scheme=TEXT)
    a, b = tr.spout("a"), tr.spout("b")
    first, second = tr.emit([a], stage="s"), tr.emit([a], stage="s")
    assert first.id == ids.tuple_id("s", 0, [a.id])
    assert second.id == ids.tuple_id("s", 1, [a.id])
    assert tr.emit([a], stage="t").id == ids.tuple_id("t", 0, [a.id])
    assert tr.emit([b], stage="s").id == ids.tuple_id("s", 0, [b.id])
    assert tr.emit([a, b], stage="s").id == ids.tuple_id("s", 0, [a.id, b.id])


def test_explicit_positions_are_unique_and_the_counter_skips_them() -> None:
    tr = Tracker("orders", clock=Clock(), id_scheme=TEXT)
    a = tr.spout("a")
    assert tr.emit([a], stage="s", position=1).id == ids.tuple_id("s", 1, [a.id])
    with pytest.raises(ValueError, match="already emitted position 1"):
        tr.emit([a], stage="s", position=1)
    assert tr.emit([a], stage="s").id == ids.tuple_id("s", 0, [a.id])
    assert tr.emit([a], stage="s").id == ids.tuple_id("s", 2, [a.id])
    with pytest.raises(ValueError, match="position must be an int >= 0"):
        tr.emit([a], stage="s", position=-1)


def test_same_message_registers_once_and_returns_an_equal_tuple() -> None:
    tr = Tracker("orders", clock=Clock())
    first = tr.spout("m-1", source="sqs", source_queue="in", payload="{}")
    assert len(tr.drain()) == 1
    assert len(tr.drain_roots()) == 1
    again = tr.spout("m-1", source="sqs", source_queue="in", payload="{}")
    assert again == first
    assert tr.drain() == []
    assert tr.drain_roots() == []
    # Another queue is another root.
    assert tr.spout("m-1", source="sqs", source_queue="other").roots != first.roots


def test_re_registering_with_other_consumers_is_refused() -> None:
    tr = Tracker("orders", clock=Clock())
    tr.spout("m-1", to=["a", "b"])
    with pytest.raises(ValueError, match="was registered with consumers"):
        tr.spout("m-1")


def test_two_trackers_write_the_same_init_for_the_same_message() -> None:
    # A re-run micro-batch: same ids, so the fold drops the second copy.
    one, two = Tracker("orders", clock=Clock()), Tracker("orders", clock=Clock())
    assert one.spout("m-1") == two.spout("m-1")
    assert one.drain() == two.drain()


def test_roots_row_of_a_first_attempt() -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout(
        "m-1",
        source="kafka",
        source_queue="orders",
        payload=None,
        source_position="orders:0:42",
    )
    (row,) = tr.drain_roots()
    assert list(row) == ROOT_COLUMNS
    assert row == {
        "root_id": ids.root_id("orders", "kafka:orders:m-1"),
        "app": "orders",
        "attempt": 1,
        "origin_root_id": _root(order),
        "source": "kafka",
        "source_queue": "orders",
        "source_message_id": "m-1",
        "source_position": "orders:0:42",
        "payload": None,
        "ingested_at": T0,
        "id_scheme": NUMERIC,
    }


def test_roots_row_of_a_replay_attempt() -> None:
    tr = Tracker("orders", clock=Clock())
    origin = ids.root_id("orders", "sqs:in:m-1")
    replay = tr.spout(
        "m-9", source="sqs", source_queue="in", attempt=2, origin_root_id=origin, payload="{}"
    )
    (row,) = tr.drain_roots()
    assert _root(replay) == ids.hash64("attempt", origin, 2) == row["root_id"]
    assert (row["attempt"], row["origin_root_id"], row["payload"]) == (2, origin, "{}")
    with pytest.raises(ValueError, match="origin_root_id"):
        tr.spout("m-9", attempt=2)


def test_drain_returns_and_clears_what_was_written() -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout("m-1")
    first = tr.drain()
    assert [e["kind"] for e in first] == ["init"]
    assert tr.drain() == []
    tr.ack(order, stage="s")
    assert [e["kind"] for e in tr.drain()] == ["ack"]
    # Events and roots drain separately.
    assert len(tr.drain_roots()) == 1
    assert tr.drain_roots() == []


def test_event_rows_have_exactly_the_v1_columns() -> None:
    tr = Tracker("orders", clock=Clock())
    a, b = tr.spout("a"), tr.spout("b")
    tr.ack(a, stage="s")
    tr.fail(b, stage="s", reason="bad")
    events = tr.drain()
    assert [e["kind"] for e in events] == ["init", "init", "ack", "fail"]
    for event in events:
        assert list(event) == EVENT_COLUMNS
        assert event["app"] == "orders"
        assert event["event_time"] == T0
        assert event["reason"] == ("bad" if event["kind"] == "fail" else None)
    ack = events[2]
    assert ack["event_id"] == ids.event_id("orders", _root(a), "ack", "s", a.id)


def test_event_times_are_utc_from_the_clock() -> None:
    plus_two = timezone(timedelta(hours=2))
    tr = Tracker("orders", clock=Clock(datetime(2024, 1, 1, 14, 0, tzinfo=plus_two)))
    tr.spout("m-1")
    (event,) = tr.drain()
    assert event["event_time"] == T0
    assert event["event_time"].utcoffset() == timedelta(0)
    naive = Tracker("orders", clock=lambda: datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="aware"):
        naive.spout("m-1")


def test_default_clock_is_aware_utc_now() -> None:
    tr = Tracker("orders")
    before = datetime.now(UTC)
    tr.spout("m-1")
    (event,) = tr.drain()
    assert before <= event["event_time"] <= datetime.now(UTC)


def test_fail_writes_one_zero_row_per_root_and_drops_pending_edges() -> None:
    tr = Tracker("orders", clock=Clock())
    a, b = tr.spout("a"), tr.spout("b")
    pair = tr.emit([a, b], stage="pair")
    tr.emit([pair], stage="next")
    tr.fail(pair, stage="next", reason="sink down")
    tr.ack(a, stage="pair")
    rows = tr.drain()
    fails = [row for row in rows if row["kind"] == "fail"]
    assert [(f["root_id"], f["ack_val"], f["stage"]) for f in fails] == [
        (_root(a), 0, "next"),
        (_root(b), 0, "next"),
    ]
    folds = fold(rows)
    assert folds[_root(a)].failed
    assert folds[_root(b)].failed
    assert folds[_root(a)].fail_reason == "sink down"


def test_tuple_repr_is_short_with_a_hex_id() -> None:
    tr = Tracker("orders", clock=Clock())
    order = tr.spout("m-1")
    line = tr.emit([order], stage="split")
    assert re.fullmatch(r"Tuple\(0x[0-9a-f]{16}, stage='split', roots=1\)", repr(line))
    assert f"{line.id & (2**64 - 1):016x}" in repr(line)


def test_tuples_are_frozen() -> None:
    order = Tracker("orders", clock=Clock()).spout("m-1")
    with pytest.raises(AttributeError):
        order.id = 1  # type: ignore[misc]


@pytest.mark.parametrize("module", [tracker, tuples])
def test_docstring_examples_run(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_late_event_of_an_old_attempt_never_touches_the_new_attempt() -> None:
    # Invariant 5: a replay is a new root, so the first attempt's late acks fold elsewhere.
    tr = Tracker("orders", clock=Clock())
    old = tr.spout("m-1", source="sqs", source_queue="in")
    new = tr.spout(
        "m-1-replay", source="sqs", source_queue="in", attempt=2, origin_root_id=_root(old)
    )
    before = fold(tr.drain())[_root(new)]
    tr.ack(old, stage="sink")
    after = fold(tr.drain(), prior={_root(new): before})
    assert after[_root(new)] == before
    assert after[_root(old)].event_count == 1
