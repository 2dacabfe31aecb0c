"""A ledger as a contract-v1 producer writes it: `roots` and `ack_events` exactly as
`docs/ledger.md` describes contract v1 (no `id_scheme`), by `deltalake.write_deltalake`
alone, with ids the producer made up itself. Shared by the unit and conformance tiers
(the embedded engine folds it to `STATUSES`; Spark folds the golden case `contract-v1`)
and the Spark tier (its spout registers roots into it).

Five roots of app `orders`, their events written `HOURS_AGO` before the reconcile's `now`:
- 1: init and ack, XOR 0: `completed`;
- 2: init and a fail: `failed`;
- 3: init only, older than the app's timeout (5 minutes): `timed_out`;
- 4: init and an ack that leaves XOR != 0, just now: `pending`;
- 5: a root whose row has `id_scheme` in a second file written with `schema_mode="merge"`
  in `with_id_scheme_files` (files with and without the column): `completed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

APP = "orders"
STATUSES = {1: "completed", 2: "failed", 3: "timed_out", 4: "pending"}
V1_ROOTS = [
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
]
V1_EVENTS = [
    "event_id",
    "app",
    "root_id",
    "kind",
    "ack_val",
    "stage",
    "event_time",
    "reason",
]
TS = pa.timestamp("us", tz="UTC")


def roots(ids: list[int], at: datetime) -> pa.Table:
    """`roots` rows of contract v1 (10 columns), as any producer writes them."""
    n = len(ids)
    return pa.table(
        {
            "root_id": pa.array(ids, pa.int64()),
            "app": [APP] * n,
            "attempt": pa.array([1] * n, pa.int32()),
            "origin_root_id": pa.array(ids, pa.int64()),
            "source": ["sqs"] * n,
            "source_queue": ["orders-in"] * n,
            "source_message_id": [f"m-{i}" for i in ids],
            "source_position": pa.array([None] * n, pa.string()),
            "payload": [f'{{"order": {i}}}' for i in ids],
            "ingested_at": pa.array([at] * n, TS),
        }
    )


def events(rows: Sequence[tuple[int, str, int, str | None]], at: datetime) -> pa.Table:
    """`ack_events` rows of contract v1: (root_id, kind, ack_val, reason)."""
    n = len(rows)
    return pa.table(
        {
            "event_id": [f"e-{r}-{k}-{v}" for r, k, v, _ in rows],
            "app": [APP] * n,
            "root_id": pa.array([r for r, _, _, _ in rows], pa.int64()),
            "kind": [k for _, k, _, _ in rows],
            "ack_val": pa.array([v for _, _, v, _ in rows], pa.int64()),
            "stage": ["spout" if k == "init" else "store" for _, k, _, _ in rows],
            "event_time": pa.array([at] * n, TS),
            "reason": pa.array([why for *_, why in rows], pa.string()),
        }
    )


def write_v1_ledger(warehouse: Path, now: datetime) -> None:
    """Roots 1-4 of the module's docstring, in two plain appends per table."""
    old, recent = now - timedelta(hours=1), now - timedelta(seconds=30)
    write_deltalake(warehouse / "roots", roots([1, 2, 3], old), mode="append")
    write_deltalake(warehouse / "roots", roots([4], recent), mode="append")
    first: list[tuple[int, str, int, str | None]] = [(1, "init", 11, None), (1, "ack", 11, None)]
    first += [(2, "init", 22, None), (2, "fail", 0, "bad order"), (3, "init", 33, None)]
    write_deltalake(warehouse / "ack_events", events(first, old), mode="append")
    last = events([(4, "init", 44, None), (4, "ack", 4, None)], recent)
    write_deltalake(warehouse / "ack_events", last, mode="append")


def produce(warehouse: Path, root: int, at: datetime) -> None:
    """The producer's plain append, unchanged whatever ackfold did: one completed root."""
    write_deltalake(warehouse / "roots", roots([root], at), mode="append")
    tree = [(root, "init", root * 7, None), (root, "ack", root * 7, None)]
    write_deltalake(warehouse / "ack_events", events(tree, at), mode="append")


def with_id_scheme_files(warehouse: Path, now: datetime) -> None:
    """A producer that adds `id_scheme` later with `schema_mode="merge"`: root 5 (text
    scheme, 1) in a file with the column, beside the v1 files without it."""
    at = now - timedelta(hours=1)
    rows = roots([5], at).append_column("id_scheme", pa.array([1], pa.int32()))
    write_deltalake(warehouse / "roots", rows, mode="append", schema_mode="merge")
    tree = events([(5, "init", 55, None), (5, "ack", 55, None)], at)
    write_deltalake(warehouse / "ack_events", tree, mode="append")


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
