"""Write the producer test vectors, `docs/ledger/test-vectors.json`, from ackfold's own
implementation: for every id formula (root ids of each source kind and attempt, tuple
ids, edges in both forms, event ids, in both id schemes) its inputs, the exact bytes
hashed and the output; and small ledgers, written by the `Tracker` from a list of steps,
with the status each root folds to.

A producer in another language checks itself against the file (docs/ledger.md, "Writing
a producer in another language"); the suite checks ackfold against it
(tests/unit/test_ledger_vectors.py: the Python ids and Tracker, and the embedded engine's
fold; tests/spark/test_ledger_vectors.py: the Spark SQL ids and the Spark fold).

    python scripts/ledger_vectors.py            # rewrite the file
    python scripts/ledger_vectors.py --check    # exit 1 if the file differs from this code

Every 64-bit value (ids, ack vals) is a JSON string of its signed decimal form: many JSON
parsers read numbers as doubles, which hold 53 bits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import xxhash

from ackfold.ledger.schema import ids, schemes
from ackfold.reconcile.fold import classify, fold
from ackfold.track.tracker import Tracker
from ackfold.track.tuples import Tuple

PATH = Path(__file__).resolve().parents[1] / "docs" / "ledger" / "test-vectors.json"
FORMAT = 1
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
# The statuses of the ledgers are as of `NOW`, each root's timeout `TIMEOUT`.
NOW = T0 + timedelta(minutes=1)
TIMEOUT = timedelta(minutes=5)
SCHEMES = (schemes.TEXT, schemes.NUMERIC)


def text(value: int) -> str:
    """A 64-bit value as the file holds it."""
    return str(value)


def hash64_case(*parts: str | int) -> dict[str, Any]:
    joined = ids.SEP.join(str(p) for p in parts).encode("utf-8")
    return {
        "parts": [str(p) for p in parts],
        "bytes": joined.hex(),
        "id": text(ids.hash64(*parts)),
    }


def hash_numbers_case(*parts: int | str) -> dict[str, Any]:
    typed, chain, seed = [], [], ids.SEED
    for part in parts:
        if isinstance(part, str):
            typed.append({"string": part})
            data = part.encode("utf-8")
        else:
            typed.append({"bigint": text(part)})
            data = struct.pack("<q", part)
        seed = xxhash.xxh64_intdigest(data, seed=seed)
        chain.append({"bytes": data.hex(), "hash": f"{seed:016x}"})
    return {"parts": typed, "steps": chain, "id": text(schemes.hash_numbers(*parts))}


# Source coordinates of each kind, as the spouts register them: (source, source_queue,
# message_id). The source key is `{source}:{source_queue}:{message_id}`.
SOURCES: tuple[tuple[str, str, str, str], ...] = (
    ("sqs", "sqs", "orders-in", "5fea7756-0ea4-451a-a703-a558b933e274"),
    ("kafka", "kafka", "orders", "0:42@Zm9vYmFyYmF6cXV4AAAAAA"),
    ("files", "files", "/data/inbox/orders", "o-1"),
    ("any other source", "my-source", "queue/with:colons", "message 1"),
    ("text beyond ASCII", "sqs", "bestellungen-ein", "nachricht-ü-€-𝄞"),
)


def root_cases() -> list[dict[str, Any]]:
    cases = []
    for kind, source, queue, message in SOURCES:
        key = f"{source}:{queue}:{message}"
        first = ids.root_id("orders", key)
        cases.append(
            {
                "kind": kind, "app": "orders", "source": source, "source_queue": queue,
                "message_id": message, "source_key": key, "attempt": 1,
                "origin_root_id": None, "hashed": hash64_case("root", "orders", key),
                "root_id": text(first),
            }
        )  # fmt: skip
        for attempt in (2, 3):
            cases.append(
                {
                    "kind": f"{kind}, a replay", "app": "orders", "attempt": attempt,
                    "origin_root_id": text(first),
                    "hashed": hash64_case("attempt", first, attempt),
                    "root_id": text(ids.root_id("orders", key, attempt, first)),
                }
            )  # fmt: skip
    return cases


ROOTS = (
    ids.root_id("orders", "sqs:orders-in:5fea7756-0ea4-451a-a703-a558b933e274"),
    ids.root_id("orders", "kafka:orders:0:42@Zm9vYmFyYmF6cXV4AAAAAA"),
    1,
    -1,
)


def spout_cases() -> list[dict[str, Any]]:
    return [
        {"root_id": text(r), "scheme": s, "tuple_id": text(schemes.spout_tuple_id(r, s))}
        for r in ROOTS
        for s in SCHEMES
    ]


def tuple_cases() -> list[dict[str, Any]]:
    spout = schemes.spout_tuple_id(ROOTS[0], schemes.NUMERIC)
    other = schemes.spout_tuple_id(ROOTS[1], schemes.NUMERIC)
    inputs: list[tuple[str, int, list[int]]] = [
        ("split", 0, [spout]),
        ("split", 7, [spout]),
        ("join", 0, [spout, other]),
        ("self-join", 0, [spout, spout]),
        ("zählen", 1, [-5]),
    ]
    cases = []
    for stage, position, anchors in inputs:
        for s in SCHEMES:
            case: dict[str, Any] = {
                "stage": stage, "position": position, "anchor_ids": [text(a) for a in anchors],
                "scheme": s, "tuple_id": text(schemes.tuple_id(stage, position, anchors, s)),
            }  # fmt: skip
            if s == schemes.NUMERIC:
                case["stage_key"] = text(schemes.stage_key(stage))
            cases.append(case)
    return cases


def edge_cases() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    t = schemes.tuple_id("split", 0, [schemes.spout_tuple_id(ROOTS[0], 2)], schemes.NUMERIC)
    general = [
        {
            "tuple_id": text(t),
            "root_id": text(r),
            "anchor_index": k,
            "consumer": c,
            "scheme": s,
            "edge_id": text(schemes.edge_id(t, r, k, c, s)),
        }
        for r in ROOTS[:2]
        for k, c in ((0, ""), (1, ""), (0, "count"), (0, "störe"))
        for s in SCHEMES
    ]
    short = [
        {
            "tuple_id": text(t),
            "root_id": text(r),
            "scheme": s,
            "edge_id": text(schemes.one_edge(t, r, s)),
        }
        for r in ROOTS[:2]
        for s in SCHEMES
    ]
    return general, short


def event_cases() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    r = ROOTS[0]
    t = schemes.spout_tuple_id(r, schemes.NUMERIC)
    single = []
    kinds = (
        ("orders", "init", "spout"),
        ("orders", "ack", "split"),
        ("orders", "fail", "store"),
        ("bestellungen", "ack", "zählen"),
    )
    for app, kind, stage in kinds:
        joined = ids.SEP.join([app, str(r), kind, stage, str(t)])
        single.append(
            {
                "app": app, "root_id": text(r), "kind": kind, "stage": stage,
                "tuple_id": text(t), "text": joined,
                "event_id": ids.event_id(app, r, kind, stage, t),
            }
        )  # fmt: skip
        assert single[-1]["event_id"] == hashlib.md5(joined.encode()).hexdigest()  # noqa: S324
    compact = []
    tuples = [schemes.tuple_id("split", p, [t], schemes.NUMERIC) for p in range(3)]
    for count in (1, 3):
        signature = ids.tuple_set_signature(tuples[:count])
        parts = ["orders", str(r), "ack", "count"] + ([str(count)] if count > 1 else [])
        compact.append(
            {
                "app": "orders", "root_id": text(r), "stage": "count", "count": count,
                "tuple_ids": [text(x) for x in tuples[:count]], "signature": text(signature),
                "text": ids.SEP.join([*parts, str(signature)]),
                "event_id": ids.compact_event_id("orders", r, "count", count, signature),
            }
        )  # fmt: skip
    return single, compact


# The ledgers: each a list of steps a tracker runs, in one micro-batch. A step names the
# tuple it makes (`as`) and the tuples it uses by those names; `origin` names a root
# registered in an earlier ledger step (a replay's attempt 1).
LEDGERS: tuple[dict[str, Any], ...] = (
    {
        "name": "split and count, numeric ids (short tuples: each is its own edge)",
        "scheme": schemes.NUMERIC,
        "steps": [
            {"op": "spout", "as": "line", "message_id": "m-1", "source": "sqs",
             "source_queue": "lines", "payload": "a b"},
            {"op": "emit", "as": "a", "anchors": ["line"], "stage": "split"},
            {"op": "emit", "as": "b", "anchors": ["line"], "stage": "split"},
            {"op": "ack", "tuple": "line", "stage": "split"},
            {"op": "ack", "tuple": "a", "stage": "count"},
            {"op": "ack", "tuple": "b", "stage": "count"},
        ],
    },
    {
        "name": "the same, text ids (every edge hashed)",
        "scheme": schemes.TEXT,
        "steps": [
            {"op": "spout", "as": "line", "message_id": "m-2", "source": "sqs",
             "source_queue": "lines", "payload": "a b"},
            {"op": "emit", "as": "a", "anchors": ["line"], "stage": "split"},
            {"op": "emit", "as": "b", "anchors": ["line"], "stage": "split"},
            {"op": "ack", "tuple": "line", "stage": "split"},
            {"op": "ack", "tuple": "a", "stage": "count"},
            {"op": "ack", "tuple": "b", "stage": "count"},
        ],
    },
    {
        "name": "a diamond (two named consumers), a parent anchored twice, a sink (to=[])",
        "scheme": schemes.NUMERIC,
        "steps": [
            {"op": "spout", "as": "click", "message_id": "0:41@Zm9vYmFyYmF6cXV4AAAAAA",
             "source": "kafka", "source_queue": "clicks", "source_position": "clicks:0:41",
             "to": ["store", "count"]},
            {"op": "emit", "as": "stored", "anchors": ["click"], "stage": "store", "to": []},
            {"op": "ack", "tuple": "click", "stage": "store"},
            {"op": "emit", "as": "twice", "anchors": ["click", "click"], "stage": "count"},
            {"op": "ack", "tuple": "click", "stage": "count"},
            {"op": "ack", "tuple": "twice", "stage": "total"},
        ],
    },
    {
        "name": "a join of two roots, one still pending",
        "scheme": schemes.NUMERIC,
        "steps": [
            {"op": "spout", "as": "order", "message_id": "o-1", "source": "files",
             "source_queue": "/data/inbox/orders", "payload": "{\"id\": \"o-1\"}"},
            {"op": "spout", "as": "price", "message_id": "p-1", "source": "files",
             "source_queue": "/data/inbox/prices", "payload": "{\"id\": \"p-1\"}"},
            {"op": "emit", "as": "priced", "anchors": ["order", "price"], "stage": "join"},
            {"op": "ack", "tuple": "order", "stage": "join"},
            {"op": "ack", "tuple": "price", "stage": "join"},
            {"op": "emit", "as": "late", "anchors": ["priced"], "stage": "enrich"},
            {"op": "ack", "tuple": "priced", "stage": "enrich"},
        ],
    },
    {
        "name": "a failed root, and its replay (attempt 2) completed",
        "scheme": schemes.NUMERIC,
        "steps": [
            {"op": "spout", "as": "first", "message_id": "m-9", "source": "sqs",
             "source_queue": "orders-in", "payload": "{\"qty\": 0}"},
            {"op": "fail", "tuple": "first", "stage": "store", "reason": "no quantity"},
            {"op": "spout", "as": "second", "message_id": "m-9-replayed", "source": "sqs",
             "source_queue": "orders-in", "payload": "{\"qty\": 0}", "attempt": 2,
             "origin": "first"},
            {"op": "ack", "tuple": "second", "stage": "store"},
        ],
    },
    {
        "name": "compact acks: one pre-folded event per root and stage",
        "scheme": schemes.NUMERIC,
        "acks": "compact",
        "steps": [
            {"op": "spout", "as": "line", "message_id": "m-3", "source": "sqs",
             "source_queue": "lines", "payload": "x y z"},
            {"op": "emit", "as": "x", "anchors": ["line"], "stage": "split"},
            {"op": "emit", "as": "y", "anchors": ["line"], "stage": "split"},
            {"op": "emit", "as": "z", "anchors": ["line"], "stage": "split"},
            {"op": "ack", "tuple": "line", "stage": "split"},
            {"op": "ack", "tuple": "x", "stage": "count"},
            {"op": "ack", "tuple": "y", "stage": "count"},
            {"op": "ack", "tuple": "z", "stage": "count"},
        ],
    },
)  # fmt: skip


def run_steps(
    app: str, scheme: int, steps: Sequence[dict[str, Any]], acks: str = "per_tuple"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The `roots` and `ack_events` rows a `Tracker` writes for `steps`, at `T0`."""
    tracker = Tracker(app, clock=lambda: T0, id_scheme=scheme, acks=acks)
    named: dict[str, Tuple] = {}
    for step in steps:
        op = step["op"]
        if op == "spout":
            origin = named[step["origin"]].roots[0] if "origin" in step else None
            named[step["as"]] = tracker.spout(
                step["message_id"],
                source=step["source"],
                source_queue=step["source_queue"],
                attempt=step.get("attempt", 1),
                origin_root_id=origin,
                payload=step.get("payload"),
                source_position=step.get("source_position"),
                to=step.get("to"),
            )
        elif op == "emit":
            named[step["as"]] = tracker.emit(
                [named[a] for a in step["anchors"]], stage=step["stage"], to=step.get("to")
            )
        elif op == "ack":
            tracker.ack(named[step["tuple"]], stage=step["stage"])
        elif op == "fail":
            tracker.fail(named[step["tuple"]], stage=step["stage"], reason=step["reason"])
        else:
            raise ValueError(f"unknown step {op!r}")
    return tracker.drain_roots(), tracker.drain()


def as_json_row(row: dict[str, Any]) -> dict[str, Any]:
    """A ledger row with its 64-bit values as text and its times in ISO 8601."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        if name in ("root_id", "origin_root_id", "ack_val") and value is not None:
            out[name] = text(value)
        elif isinstance(value, datetime):
            out[name] = value.isoformat().replace("+00:00", "Z")
        else:
            out[name] = value
    return out


def ledger_cases() -> list[dict[str, Any]]:
    cases = []
    for ledger in LEDGERS:
        acks = ledger.get("acks", "per_tuple")
        roots, events = run_steps("orders", ledger["scheme"], ledger["steps"], acks)
        folds = fold(events)
        statuses = {
            text(r): classify(f, now=NOW, timeout=TIMEOUT) for r, f in sorted(folds.items())
        }
        cases.append(
            {
                **ledger,
                "acks": acks,
                "roots": [as_json_row(r) for r in roots],
                "events": [as_json_row(e) for e in events],
                "statuses": statuses,
            }
        )
    return cases


def vectors() -> dict[str, Any]:
    general, short = edge_cases()
    single, compact = event_cases()
    return {
        "format": FORMAT,
        "about": (
            "ackfold's producer test vectors: the inputs and outputs of every id formula of "
            "ledger contract v1, and small ledgers with their statuses. Written by "
            "scripts/ledger_vectors.py; docs/ledger.md says how to read them. Every 64-bit "
            "value is a string of its signed decimal form."
        ),
        "hash64": {
            "about": "text scheme: xxhash64, seed 42, of the UTF-8 bytes of the parts "
            "(decimal text for numbers) joined by 0x1f; as a signed 64-bit int, 0 mapped to 1",
            "seed": ids.SEED,
            "separator": "\u001f",
            "cases": [
                hash64_case("root", "orders", "sqs:orders-in:m-1"),
                hash64_case("attempt", -7661393185244144625, 2),
                hash64_case("tuple", "zählen", 0, 11, -12),
            ],
        },
        "hash_numbers": {
            "about": "numeric scheme: xxhash64 of each part in turn, seeded with the hash "
            "of the parts before it (42 for the first); a bigint as its 8 bytes, two's "
            "complement, little-endian; a string as its UTF-8 bytes; the result as a "
            "signed 64-bit int, 0 mapped to 1. `steps` gives each part's bytes and the "
            "unsigned hash after it, in hex",
            "cases": [
                hash_numbers_case(1, ROOTS[0]),
                hash_numbers_case(4, "split"),
                hash_numbers_case(3, -1, 1, 0, ""),
                hash_numbers_case(3, 5, 6, 1, "störe"),
            ],
        },
        "root_ids": root_cases(),
        "spout_tuple_ids": spout_cases(),
        "tuple_ids": tuple_cases(),
        "edge_ids": general,
        "short_edge_ids": short,
        "event_ids": single,
        "compact_event_ids": compact,
        "ledgers": {
            "about": "each ledger's rows, as the Tracker writes them for its steps (one "
            "micro-batch, every event at event_time), and the status each root folds to "
            f"as of {NOW.isoformat().replace('+00:00', 'Z')} with a timeout of "
            f"{TIMEOUT.total_seconds():g} s",
            "now": NOW.isoformat().replace("+00:00", "Z"),
            "timeout_seconds": TIMEOUT.total_seconds(),
            "cases": ledger_cases(),
        },
    }


def render() -> str:
    return json.dumps(vectors(), indent=1, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ledger_vectors.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    wanted = render()
    if args.check:
        if not PATH.is_file() or PATH.read_text(encoding="utf-8") != wanted:
            print(f"{PATH} is not what this code writes: run scripts/ledger_vectors.py")
            return 1
        print(f"{PATH}: up to date")
        return 0
    PATH.parent.mkdir(parents=True, exist_ok=True)
    PATH.write_text(wanted, encoding="utf-8")
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
