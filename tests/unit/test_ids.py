"""ids: the formulas, checked against xxhash and hashlib called directly."""

from __future__ import annotations

import doctest
import hashlib

import pytest
import xxhash

from ackfold.ledger.schema import ids


def _signed_xxh64(text: str) -> int:
    """The expected hash, computed without ackfold: xxh64 seed 42 as a two's complement int."""
    unsigned = xxhash.xxh64_intdigest(text.encode("utf-8"), seed=42)
    return unsigned - (1 << 64) if unsigned >= (1 << 63) else unsigned


ROOT = 7532661458759473215  # root_id("orders", "sqs:orders-in:m-1")


def test_golden_vectors_are_stable() -> None:
    # Pinned values: the Spark side computes these same numbers in SQL.
    assert ids.root_id("orders", "sqs:orders-in:m-1") == ROOT
    assert ids.root_id("orders", "any", attempt=2, origin_root_id=ROOT) == 6831547874858371834
    assert ids.spout_tuple_id(ROOT) == 3663340146026253672
    assert ids.tuple_id("parse", 0, [3663340146026253672]) == -4565963248405308443
    assert ids.edge_id(3663340146026253672, ROOT, 0, "") == 9021624954456826480
    assert (
        ids.event_id("orders", ROOT, "init", "spout", 3663340146026253672)
        == "06932e6176747592439cabef7976df96"
    )


def test_root_id_attempt_1_hashes_the_source_key() -> None:
    assert ids.root_id("orders", "sqs:orders-in:m-1") == _signed_xxh64(
        "root\x1forders\x1fsqs:orders-in:m-1"
    )


def test_root_id_later_attempts_hash_origin_and_attempt() -> None:
    expected = _signed_xxh64(f"attempt\x1f{ROOT}\x1f3")
    assert ids.root_id("orders", "sqs:orders-in:other", attempt=3, origin_root_id=ROOT) == expected
    # The source key of a replay does not matter: the replayed message may get a new id.
    assert ids.root_id("orders", "whatever", attempt=3, origin_root_id=ROOT) == expected


def test_spout_tuple_and_edge_ids() -> None:
    assert ids.spout_tuple_id(-5) == _signed_xxh64("spout\x1f-5")
    assert ids.tuple_id("join", 2, [-1, 9]) == _signed_xxh64("tuple\x1fjoin\x1f2\x1f-1\x1f9")
    assert ids.edge_id(-3, 8, 1, "store") == _signed_xxh64("edge\x1f-3\x1f8\x1f1\x1fstore")
    assert ids.edge_id(-3, 8, 0, "") == _signed_xxh64("edge\x1f-3\x1f8\x1f0\x1f")


def test_event_id_is_md5_of_the_joined_fields() -> None:
    expected = hashlib.md5(b"orders\x1f-12\x1fack\x1fparse\x1f34").hexdigest()
    assert ids.event_id("orders", -12, "ack", "parse", 34) == expected


def test_hash64_is_signed_two_complement() -> None:
    # Find inputs on both sides of 2**63 so both branches of the conversion run.
    texts = [f"k\x1f{i}" for i in range(64)]
    unsigned = {t: xxhash.xxh64_intdigest(t.encode(), seed=42) for t in texts}
    high = next(t for t in texts if unsigned[t] >= 1 << 63)
    low = next(t for t in texts if unsigned[t] < 1 << 63)
    assert ids.hash64(*high.split("\x1f")) == unsigned[high] - (1 << 64) < 0
    assert ids.hash64(*low.split("\x1f")) == unsigned[low] > 0


def test_hash64_maps_zero_to_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xxhash, "xxh64_intdigest", lambda data, seed: 0)
    assert ids.hash64("anything") == 1


def test_hash64_extremes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xxhash, "xxh64_intdigest", lambda data, seed: (1 << 64) - 1)
    assert ids.hash64("x") == -1
    monkeypatch.setattr(xxhash, "xxh64_intdigest", lambda data, seed: 1 << 63)
    assert ids.hash64("x") == -(1 << 63)


@pytest.mark.parametrize("part", [None, True, 1.5, b"bytes"])
def test_hash64_refuses_parts_spark_would_render_differently(part: object) -> None:
    with pytest.raises(TypeError):
        ids.hash64("root", part)  # type: ignore[arg-type]


def test_hash64_refuses_the_separator_inside_a_part() -> None:
    # ("a\x1fb",) and ("a", "b") would hash the same.
    with pytest.raises(ValueError, match="separator"):
        ids.hash64("a\x1fb")


@pytest.mark.parametrize("attempt", [0, -1])
def test_root_id_refuses_attempts_below_one(attempt: int) -> None:
    with pytest.raises(ValueError, match="attempt must be an int >= 1"):
        ids.root_id("orders", "k", attempt=attempt, origin_root_id=ROOT)


def test_root_id_later_attempt_needs_origin() -> None:
    with pytest.raises(ValueError, match="needs the origin_root_id"):
        ids.root_id("orders", "k", attempt=2)


def test_root_id_attempt_1_refuses_a_different_origin() -> None:
    with pytest.raises(ValueError, match="its own origin"):
        ids.root_id("orders", "sqs:orders-in:m-1", origin_root_id=ROOT + 1)
    assert ids.root_id("orders", "sqs:orders-in:m-1", origin_root_id=ROOT) == ROOT


def test_docstring_examples_run() -> None:
    result = doctest.testmod(ids)
    assert result.attempted > 0
    assert result.failed == 0
