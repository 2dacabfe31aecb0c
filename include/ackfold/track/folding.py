"""Compact acks folded by the driver that commits them, not by a Spark shuffle.

``StageTracker.ack`` in compact mode returns its rows folded in Spark: one row per root,
which needs a shuffle by root. Where a batch's events are committed by the driver
(``write_batch`` with delta-rs: a classic session on a local warehouse, or any object
store), it collects instead each such call's rows per input, as per-tuple acks without
their event ids (``remember`` keeps them beside the folded frame), and folds them here
with NumPy: the same rows, one Spark job for all the batch's events, no shuffle, and one
md5 per root rather than per input. ``ackfold.track.compact.compact_acks`` is the rule in
plain Python; ``tests/unit/test_compact_properties.py`` holds the two to it.

The rows ``StageTracker`` makes (``stamp_on_driver``) are stamped here too: their
``event_time`` is the driver's clock, read once per batch, not a ``current_timestamp()``
in the Spark job. Spark folds that into a new literal for every query, which changed the
generated code of every batch, so Spark compiled the batch's code again each time (about
half a CPU-second a tracked step, measured in ``docs/benchmarks.md``).

Example:
    >>> import pyarrow as pa
    >>> from datetime import datetime, timezone
    >>> at = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> rows = pa.Table.from_pylist([
    ...     {"event_id": None, "app": "wc", "root_id": 9, "kind": "ack", "ack_val": 1,
    ...      "stage": "count", "event_time": at, "reason": None, "tuple_id": 11, "fold_set": 0},
    ...     {"event_id": None, "app": "wc", "root_id": 9, "kind": "ack", "ack_val": 2,
    ...      "stage": "count", "event_time": at, "reason": None, "tuple_id": 12, "fold_set": 0},
    ... ])
    >>> [(r["root_id"], r["ack_val"]) for r in fold(rows).to_pylist()]
    [(9, 3)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import reduce
from typing import TYPE_CHECKING, Any, Final
from weakref import WeakKeyDictionary

from ackfold.ledger.schema import ids
from ackfold.ledger.schema.contract import ACK
from ackfold.ledger.schema.tables import ACK_EVENTS_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TUPLE_ID: Final = "tuple_id"
# Which compact call a row of a batch's events came from: each call is its own set.
FOLD_SET: Final = "fold_set"

# Which rows the driver stamps with its clock, in a collected batch (dropped before commit).
STAMPED: Final = "stamped"

# Each compact ack frame `StageTracker.ack` returned, to its rows per input (event ids null)
# and the app and stage they are acked by.
_UNFOLDED: WeakKeyDictionary[DataFrame, tuple[DataFrame, str, str]] = WeakKeyDictionary()
# Event frames whose `event_time` is the time they are computed: the collecting driver's.
_ON_DRIVER: WeakKeyDictionary[DataFrame, bool] = WeakKeyDictionary()


def stamp_on_driver(frame: DataFrame) -> DataFrame:
    """``frame``, event rows whose ``event_time`` is "now" (``current_timestamp()``), marked
    so that ``collect`` leaves the time out of the Spark job and stamps it itself."""
    _ON_DRIVER[frame] = True
    return frame


def remember(folded: DataFrame, unfolded: DataFrame, *, app: str, stage: str) -> DataFrame:
    """``folded``, a compact ack frame of ``stage`` of ``app``, with ``unfolded`` (its rows
    per input, as event rows with a null ``event_id`` and a ``tuple_id``) kept for
    ``collect``, which takes of them only the numbers: root, tuple and ack val."""
    _UNFOLDED[folded] = (unfolded, app, stage)
    return folded


def collect(frames: Sequence[DataFrame], *, now: datetime | None = None) -> pa.Table:
    """The event rows of ``frames`` as Arrow, in one Spark job: a frame that ``remember``
    knows comes unfolded and is folded here, any other as it is. Rows of the frames
    ``StageTracker`` made (``stamp_on_driver``) get ``event_time`` ``now`` (default: the
    driver's clock, read once), so the Spark job holds no time that changes per batch."""
    frame, labels = driver_frame(frames)
    return stamp_and_fold(frame, now=now, labels=labels)


def driver_frame(frames: Sequence[DataFrame]) -> tuple[DataFrame, dict[int, tuple[str, str]]]:
    """The one frame ``collect`` collects: every row of ``frames``, a remembered compact
    frame's rows per input, with ``tuple_id``, ``fold_set`` and ``stamped`` beside the
    contract's columns (a stamped row's ``event_time`` null, for the driver to fill); and
    each fold set's app and stage. A row per input carries three numbers (root, tuple, ack
    val): its strings are the same for the whole set, so they stay on the driver."""
    from pyspark.sql import functions as F

    numbers = ("root_id", "ack_val", TUPLE_ID)

    def stamped(frame: DataFrame, on_driver: bool) -> list[Any]:
        if not on_driver:
            return [*ACK_EVENTS_COLUMNS, F.lit(False).alias(STAMPED)]
        # A constant null: the generated code is the same every batch (no recompile).
        at = F.lit(None).cast("timestamp").alias("event_time")
        return [
            *(at if c == "event_time" else c for c in ACK_EVENTS_COLUMNS),
            F.lit(True).alias(STAMPED),
        ]

    parts = []
    labels: dict[int, tuple[str, str]] = {}
    for index, frame in enumerate(frames):
        remembered = _UNFOLDED.get(frame)
        if remembered is None:
            parts.append(
                frame.select(
                    *stamped(frame, frame in _ON_DRIVER),
                    F.lit(None).cast("bigint").alias(TUPLE_ID),
                    F.lit(None).cast("int").alias(FOLD_SET),
                )
            )
        else:
            unfolded, app, stage = remembered
            labels[index] = (app, stage)
            columns = [
                c if c in numbers else F.lit(None).cast(kind).alias(c)
                for c, kind in (*_TYPES, (TUPLE_ID, "bigint"))
            ]
            parts.append(
                unfolded.select(*columns, F.lit(True).alias(STAMPED), F.lit(index).alias(FOLD_SET))
            )
    return reduce(lambda a, b: a.unionByName(b), parts), labels


# The contract's columns of `ack_events`, in order, with their Spark types.
_TYPES: Final = (
    ("event_id", "string"),
    ("app", "string"),
    ("root_id", "bigint"),
    ("kind", "string"),
    ("ack_val", "bigint"),
    ("stage", "string"),
    ("event_time", "timestamp"),
    ("reason", "string"),
)
assert tuple(c for c, _ in _TYPES) == tuple(ACK_EVENTS_COLUMNS)


def stamp_and_fold(
    table: DataFrame | pa.Table,
    *,
    now: datetime | None = None,
    labels: Mapping[int, tuple[str, str]] | None = None,
) -> pa.Table:
    """``driver_frame``'s rows (collected here if a DataFrame), the ``stamped`` ones given
    ``event_time`` ``now``, then folded (``fold``, with ``labels``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = table if isinstance(table, pa.Table) else table.toArrow()
    at = rows.column("event_time")
    when = pa.scalar(now or datetime.now(UTC), type=at.type)
    filled = pc.if_else(rows.column(STAMPED), when, at)
    rows = rows.set_column(rows.schema.get_field_index("event_time"), "event_time", filled)
    return fold(rows.drop_columns([STAMPED]), labels=labels)


def fold(table: pa.Table, *, labels: Mapping[int, tuple[str, str]] | None = None) -> pa.Table:
    """``table``'s event rows (the contract's columns, ``tuple_id`` and ``fold_set``) with
    the rows of each fold set made one row per root, as ``compact.compact_acks`` makes
    them: copies of an input count once, the ack vals and the tuple ids XORed, the latest
    event time, the id of the set (``ids.compact_event_id``). Other rows are kept.
    ``labels`` gives each fold set's app and stage (its rows' own are then not read: a
    set's rows are acks, without a reason)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    marked = pc.is_valid(table.column(FOLD_SET))
    kept = table.filter(pc.invert(marked)).select(list(ACK_EVENTS_COLUMNS))
    rows = table.filter(marked)
    if not rows.num_rows:
        return kept

    def numbers(name: str) -> Any:
        return rows.column(name).to_numpy().astype(np.int64, copy=False)

    sets, roots, tuples, vals = (numbers(n) for n in (FOLD_SET, "root_id", TUPLE_ID, "ack_val"))
    times = pc.cast(rows.column("event_time"), pa.int64()).to_numpy()
    order = np.lexsort((tuples, roots, sets))
    sets, roots, tuples, vals, times = (a[order] for a in (sets, roots, tuples, vals, times))
    # One row per (set, root, tuple): a copy of an input counts once (its value is the same).
    distinct = np.ones(len(order), dtype=bool)
    distinct[1:] = (sets[1:] != sets[:-1]) | (roots[1:] != roots[:-1]) | (tuples[1:] != tuples[:-1])
    sets, roots, tuples, vals, times, firsts = (
        a[distinct] for a in (sets, roots, tuples, vals, times, order)
    )
    starts = np.flatnonzero(np.r_[True, (sets[1:] != sets[:-1]) | (roots[1:] != roots[:-1])])
    counts = np.diff(np.r_[starts, len(roots)])
    signatures = np.bitwise_xor.reduceat(tuples, starts)
    ack_vals = np.bitwise_xor.reduceat(vals, starts)
    latest = np.maximum.reduceat(times, starts)
    head = rows.take(pa.array(firsts[starts]))
    if labels is None:
        apps, stages = head.column("app").to_pylist(), head.column("stage").to_pylist()
        kinds, reasons = head.column("kind"), head.column("reason")
    else:
        named = [labels[int(s)] for s in sets[starts]]
        apps, stages = [a for a, _ in named], [st for _, st in named]
        kinds = pa.array([ACK] * len(named), pa.string())
        reasons = pa.nulls(len(named), pa.string())
    root_ids = roots[starts].tolist()
    event_ids = [
        ids.compact_event_id(app, root, stage, int(n), int(signature))
        for app, root, stage, n, signature in zip(
            apps, root_ids, stages, counts, signatures, strict=True
        )
    ]
    # Every id of the unfolded rows is null: take the column's type as a string's.
    schema = pa.schema(
        [pa.field("event_id", pa.string()) if f.name == "event_id" else f for f in kept.schema]
    )
    folded = pa.table(
        {
            "event_id": pa.array(event_ids, pa.string()),
            "app": pa.array(apps, pa.string()),
            "root_id": pa.array(root_ids, pa.int64()),
            "kind": kinds,
            "ack_val": pa.array(ack_vals, pa.int64()),
            "stage": pa.array(stages, pa.string()),
            "event_time": pa.array(latest, pa.int64()).cast(schema.field("event_time").type),
            "reason": reasons,
        }
    ).cast(schema)
    return pa.concat_tables([kept.cast(schema), folded])
