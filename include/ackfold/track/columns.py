"""The tracked tuple as a Spark column: ``_ackfold``, the struct a tracked DataFrame carries.

It holds what ``tracker.Tuple`` carries (id, roots, the roots of each anchor, consumers)
plus the ids of its anchors, so a stage can compute the acks of its inputs from its
outputs (``ackfold.track.events``). The column survives a Delta table, so a job that reads
another job's output keeps tracking the same trees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F

from ackfold.track import sql_ids
from ackfold.track.tracker import Tuple, consumers_of

TUPLE_COLUMN: Final = "_ackfold"
# `tracker.Tuple` as a struct, plus `anchors` (the ids of the tuples it was emitted from,
# empty for a spout tuple): the acks of a stage's inputs are computed from its children.
TUPLE_DDL: Final = (
    "id BIGINT, roots ARRAY<BIGINT>, anchor_roots ARRAY<ARRAY<BIGINT>>, "
    "consumers ARRAY<STRING>, anchors ARRAY<BIGINT>, stage STRING"
)

ColumnOrName = Column | str


def as_tuple(value: object) -> Tuple:
    """The ``tracker.Tuple`` of one collected ``_ackfold`` struct (a ``Row``).

    Example:
        >>> from ackfold.track.stage import StageTracker
        >>> from ackfold.track.tracker import Tracker
        >>> rows = StageTracker("orders", "spout").spout(
        ...     spark.createDataFrame([("m-1",)], "id string"), message_id="id", source="sqs"
        ... ).tuples.collect()
        >>> as_tuple(rows[0]["_ackfold"]) == Tracker("orders").spout("m-1", source="sqs")
        True
    """
    row = value.asDict() if hasattr(value, "asDict") else value
    if not isinstance(row, Mapping):
        raise TypeError(f"expected an {TUPLE_COLUMN} struct (a Row), got {type(value).__name__}")
    return Tuple(
        id=row["id"],
        roots=tuple(row["roots"]),
        anchor_roots=tuple(frozenset(roots) for roots in row["anchor_roots"]),
        consumers=tuple(row["consumers"]),
        stage=row["stage"],
    )


def first_tuple(stage: str, root: Column, consumers: Sequence[str]) -> Column:
    """The ``_ackfold`` struct of a root's first tuple, emitted by spout ``stage`` to
    ``consumers``."""
    return _tuple_struct(
        tuple_id=sql_ids.spout_tuple_id(root),
        roots=F.array(root),
        anchor_roots=F.array(F.array(root)),
        consumers=_array_of(consumers),
        anchors=F.array(),
        stage=stage,
    )


def child_tuple(stage: str, anchors: Column, position: Column, to: Sequence[str] | None) -> Column:
    """The ``_ackfold`` struct of the child ``stage`` emits at ``position`` from ``anchors``
    (an array of ``_ackfold`` structs, in anchor order), delivered ``to`` those stages."""
    anchor_ids = F.transform(anchors, lambda a: a["id"])
    anchor_roots = F.transform(anchors, lambda a: a["roots"])
    return _tuple_struct(
        tuple_id=sql_ids.tuple_id(stage, position, anchor_ids),
        roots=F.array_distinct(F.flatten(anchor_roots)),
        anchor_roots=anchor_roots,
        consumers=_array_of(consumers_of(to)),
        anchors=anchor_ids,
        stage=stage,
    )


def zero() -> Column:
    """A bigint 0: a fail's ack val, an edge outside a root's tree, an aggregate's position."""
    return F.lit(0).cast("bigint")


def literal(value: str | Column) -> Column:
    """`value` as a column: a string is a literal, a column stays as it is."""
    return value if isinstance(value, Column) else F.lit(value)


def _tuple_struct(
    *,
    tuple_id: Column,
    roots: Column,
    anchor_roots: Column,
    consumers: Column,
    anchors: Column,
    stage: str,
) -> Column:
    return F.struct(
        tuple_id.alias("id"),
        roots.cast("array<bigint>").alias("roots"),
        anchor_roots.cast("array<array<bigint>>").alias("anchor_roots"),
        consumers.cast("array<string>").alias("consumers"),
        anchors.cast("array<bigint>").alias("anchors"),
        F.lit(stage).alias("stage"),
    )


def _array_of(names: Sequence[str]) -> Column:
    return F.array(*[F.lit(name) for name in names])
