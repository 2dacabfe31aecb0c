"""The tracked tuple as a Spark column: ``_ackfold``, the struct a tracked DataFrame carries.

It holds what ``tuples.Tuple`` carries (id, roots, the roots of each anchor, consumers)
plus the ids of its anchors, so a stage can compute the acks of its inputs from its
outputs (``ackfold.track.events``). The column survives a Delta table, so a job that reads
another job's output keeps tracking the same trees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ackfold.track import sql_ids
from ackfold.track.tuples import Tuple, consumers_of

TUPLE_COLUMN: Final = "_ackfold"
# `tuples.Tuple` as a struct, plus `anchors` (the ids of the tuples it was emitted from,
# empty for a spout tuple): the acks of a stage's inputs are computed from its children.
TUPLE_DDL: Final = (
    "id BIGINT, roots ARRAY<BIGINT>, anchor_roots ARRAY<ARRAY<BIGINT>>, "
    "consumers ARRAY<STRING>, anchors ARRAY<BIGINT>, stage STRING"
)

ColumnOrName = Column | str


def as_tuple(value: object) -> Tuple:
    """The ``tuples.Tuple`` of one collected ``_ackfold`` struct (a ``Row``).

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
    (an array of ``_ackfold`` structs, in anchor order), delivered ``to`` those stages
    (``[]``: to none, a sink's output without edges)."""
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


# A working column of ackfold's inside a stage's DataFrame: out of the app's way.
HIDDEN_PREFIX = "__ackfold_"


def by_id(left: Column, right: Column) -> Column:
    """A comparator of two tuples by id, for `array_sort`."""
    return F.when(left["id"] < right["id"], -1).when(left["id"] > right["id"], 1).otherwise(0)


def position_column(position: Column | int) -> Column:
    """A child's position among its siblings, as a column (an int must be >= 0)."""
    if isinstance(position, Column):
        return position
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise ValueError(f"position must be an int >= 0 or a column, got {position!r}")
    return F.lit(position)


def as_column(value: ColumnOrName) -> Column:
    """A column, or the column of that name."""
    return value if isinstance(value, Column) else F.col(value)


def optional_string(value: ColumnOrName | None) -> Column:
    """A string column, null where no value is given."""
    return (F.lit(None) if value is None else as_column(value)).cast("string")


def hidden(name: str) -> str:
    """The name of a working column of ackfold's, out of the way of the app's own."""
    return f"{HIDDEN_PREFIX}{name}"


def require_tracked(df: DataFrame, where: str) -> None:
    """Refuse a DataFrame without the tuple column, naming `where` (tracker.verb)."""
    if TUPLE_COLUMN not in df.columns:
        raise ValueError(
            f"{where}: the DataFrame has no {TUPLE_COLUMN} column (columns: "
            f"{df.columns}); pass tuples from spout(), emit(), explode() or aggregate(), "
            "or a table they were written to"
        )


def require_anchors(df: DataFrame, anchors: Sequence[ColumnOrName], where: str) -> None:
    """Refuse anchors that are not a non-empty sequence of tuple columns of `df`, naming
    `where` (tracker.verb)."""
    if isinstance(anchors, str | Column):
        raise ValueError("anchors must be a sequence of columns, e.g. ['left', 'right']")
    if not anchors:
        raise ValueError("emit needs at least one anchor: ackfold does not track unanchored tuples")
    for anchor in anchors:
        if isinstance(anchor, str) and anchor not in df.columns:
            raise ValueError(
                f"{where}: anchor column {anchor!r} is not in the DataFrame "
                f"(columns: {df.columns}); anchors name _ackfold struct columns"
            )
