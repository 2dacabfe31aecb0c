"""The producer test vectors (`docs/ledger/test-vectors.json`): the file is what its
generator writes; every id function and the `Tracker` reproduce every vector; the bytes
it says are hashed are the bytes hashed; and the embedded engine folds the vectors'
ledgers to their statuses. The Spark SQL ids and the Spark fold:
tests/spark/test_ledger_vectors.py."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import xxhash

from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema import ids, schemes
from ackfold.runs.reconcile import run_reconcile
from tests.replay_ledger import statuses
from tests.vectors import all_ledgers, generator, ledger_row, now, vectors

U64 = 1 << 64


def signed(unsigned: int) -> int:
    return unsigned - U64 if unsigned >= 1 << 63 else unsigned


def test_the_file_is_what_the_generator_writes() -> None:
    assert generator().main(["--check"]) == 0, "run scripts/ledger_vectors.py"


def test_every_section_has_cases_of_both_schemes_and_every_source_kind() -> None:
    v = vectors()
    kinds = {c["kind"] for c in v["root_ids"]}
    assert {"sqs", "kafka", "files", "sqs, a replay", "kafka, a replay"} <= kinds
    for section in ("spout_tuple_ids", "tuple_ids", "edge_ids", "short_edge_ids"):
        assert {c["scheme"] for c in v[section]} == {schemes.TEXT, schemes.NUMERIC}, section
    assert {c["kind"] for c in v["event_ids"]} == {"init", "ack", "fail"}
    assert {c["count"] for c in v["compact_event_ids"]} == {1, 3}
    statuses = {s for c in v["ledgers"]["cases"] for s in c["statuses"].values()}
    assert statuses == {"completed", "failed", "pending"}


def test_the_hashed_bytes_are_the_bytes_the_vectors_show() -> None:
    """The encodings, checked with xxhash alone, not through ackfold's functions."""
    for case in vectors()["hash64"]["cases"]:
        data = "\x1f".join(case["parts"]).encode("utf-8")
        assert data.hex() == case["bytes"]
        assert signed(xxhash.xxh64_intdigest(data, seed=42)) == int(case["id"])
        assert ids.hash64(*case["parts"]) == int(case["id"])
    for case in vectors()["hash_numbers"]["cases"]:
        seed, parts = 42, []
        for part, step in zip(case["parts"], case["steps"], strict=True):
            if "bigint" in part:
                value = int(part["bigint"])
                data = struct.pack("<q", value)  # 8 bytes, little-endian, two's complement
                parts.append(value)
            else:
                data = part["string"].encode("utf-8")
                parts.append(part["string"])
            assert data.hex() == step["bytes"]
            seed = xxhash.xxh64_intdigest(data, seed=seed)
            assert f"{seed:016x}" == step["hash"]
        assert (signed(seed) or 1) == int(case["id"])
        assert schemes.hash_numbers(*parts) == int(case["id"])


def test_the_id_functions_reproduce_every_vector() -> None:
    v = vectors()
    for c in v["root_ids"]:
        origin = None if c["origin_root_id"] is None else int(c["origin_root_id"])
        key = c.get("source_key", "")
        if c["attempt"] == 1:
            assert key == f"{c['source']}:{c['source_queue']}:{c['message_id']}"
            assert c["hashed"]["parts"] == ["root", c["app"], key]
        assert ids.root_id(c["app"], key, c["attempt"], origin) == int(c["root_id"]), c
        assert c["hashed"]["id"] == c["root_id"]
    for c in v["spout_tuple_ids"]:
        assert schemes.spout_tuple_id(int(c["root_id"]), c["scheme"]) == int(c["tuple_id"])
    for c in v["tuple_ids"]:
        anchors = [int(a) for a in c["anchor_ids"]]
        found = schemes.tuple_id(c["stage"], c["position"], anchors, c["scheme"])
        assert found == int(c["tuple_id"]), c
        if c["scheme"] == schemes.NUMERIC:
            assert schemes.stage_key(c["stage"]) == int(c["stage_key"])
    for c in v["edge_ids"]:
        found = schemes.edge_id(
            int(c["tuple_id"]), int(c["root_id"]), c["anchor_index"], c["consumer"], c["scheme"]
        )
        assert found == int(c["edge_id"]), c
    for c in v["short_edge_ids"]:
        found = schemes.one_edge(int(c["tuple_id"]), int(c["root_id"]), c["scheme"])
        assert found == int(c["edge_id"]), c
    for c in v["event_ids"]:
        named = ids.event_id(c["app"], int(c["root_id"]), c["kind"], c["stage"], int(c["tuple_id"]))
        assert named == c["event_id"] == hashlib.md5(c["text"].encode()).hexdigest()
    for c in v["compact_event_ids"]:
        signature = ids.tuple_set_signature(int(t) for t in c["tuple_ids"])
        assert signature == int(c["signature"])
        named = ids.compact_event_id(c["app"], int(c["root_id"]), c["stage"], c["count"], signature)
        assert named == c["event_id"] == hashlib.md5(c["text"].encode()).hexdigest()


def test_the_tracker_writes_every_vector_ledger_row_for_row() -> None:
    run_steps = generator().run_steps
    for case in vectors()["ledgers"]["cases"]:
        roots, events = run_steps("orders", case["scheme"], case["steps"], case["acks"])
        assert roots == [ledger_row(r) for r in case["roots"]], case["name"]
        assert events == [ledger_row(e) for e in case["events"]], case["name"]


def test_the_embedded_engine_folds_the_vector_ledgers_to_their_statuses(tmp_path: Path) -> None:
    roots, events, expected = all_ledgers()
    settings = load_settings(
        var_dir=tmp_path / "var",
        engine={"kind": "embedded"},
        defaults={"timeout": f"{vectors()['ledgers']['timeout_seconds']:g}s"},
    )
    LedgerWriter(settings.table_root).append(roots, events)
    run_reconcile(settings, now=now())
    assert statuses(settings.table_root) == expected
