"""The tracked tuple as a Spark column: ``_ackfold``, the struct a tracked DataFrame carries.

It holds what ``tuples.Tuple`` carries (id, roots, the roots of each anchor, consumers)
plus the ids of its anchors, so a stage can compute the acks of its inputs from its
outputs (``ackfold.track.events``); ``ackfold.track.layout`` says how, in which version.
The column survives a Delta table, so a job that reads another job's output keeps
tracking the same trees.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ackfold.track import layout, sql_ids
from ackfold.track.layout import TUPLE_COLUMN as TUPLE_COLUMN  # public here since 0.1
from ackfold.track.layout import as_tuple as as_tuple  # public here since 0.1
from ackfold.track.reuse import reused
from ackfold.track.tuples import UNNAMED, consumers_of

ColumnOrName = Column | str


@reused
def first_tuple(stage: str, root: Column, consumers: Sequence[str], scheme: Column) -> Column:
    """The ``_ackfold`` struct of a root's first tuple, emitted by spout ``stage`` to
    ``consumers``, its ids in the root's id ``scheme``."""
    tuple_id = sql_ids.spout_tuple_id(root, scheme)
    if tuple(consumers) == (UNNAMED,):
        return layout.struct(
            tuple_id,
            root=root,
            anchor=F.lit(None),
            stage=F.lit(stage),
            tree=F.lit(None),
            scheme=scheme,
        )
    return layout.pack(
        tuple_id,
        roots=F.array(root),
        anchor_roots=F.array(F.array(root)),
        consumers=_array_of(consumers),
        anchors=F.array().cast("array<bigint>"),
        stage=F.lit(stage),
        scheme=scheme,
    )


@reused
def child_of(stage: str, anchor: Column, position: Column, to: Sequence[str] | None) -> Column:
    """The ``_ackfold`` struct of the child ``stage`` emits at ``position`` from the one
    tuple ``anchor``: the short form, built without arrays, when the anchor has one root
    (in either form: a spout's tuple to named stages has one) and the child goes to any
    one stage (``explode``, ``emit`` with one anchor)."""
    general = child_tuple(stage, F.array(anchor), position, to)
    if consumers_of(to) != (UNNAMED,):
        return general
    tree_roots = anchor["tree"]["roots"]
    one_root = F.when(layout.is_short(anchor), anchor["root"]).when(
        F.size(tree_roots) == 1, F.get(tree_roots, 0)
    )
    scheme = layout.scheme_of(anchor)
    short = layout.struct(
        sql_ids.tuple_id(stage, position, F.array(anchor["id"]), scheme),
        root=one_root,
        anchor=anchor["id"],
        stage=F.lit(stage),
        tree=F.lit(None),
        scheme=scheme,
    )
    return F.when(one_root.isNotNull(), short).otherwise(general)


@reused
def child_tuple(stage: str, anchors: Column, position: Column, to: Sequence[str] | None) -> Column:
    """The ``_ackfold`` struct of the child ``stage`` emits at ``position`` from ``anchors``
    (an array of ``_ackfold`` structs, in anchor order), delivered ``to`` those stages
    (``[]``: to none, a sink's output without edges). Its id scheme is the lowest of its
    anchors' (``schemes.child_scheme``)."""
    anchor_ids = F.transform(anchors, lambda a: a["id"])
    anchor_roots = F.transform(anchors, layout.roots_of)
    scheme = F.array_min(F.transform(anchors, layout.scheme_of))
    return layout.pack(
        sql_ids.tuple_id(stage, position, anchor_ids, scheme),
        roots=F.array_distinct(F.flatten(anchor_roots)),
        anchor_roots=anchor_roots,
        consumers=_array_of(consumers_of(to)).cast("array<string>"),
        anchors=anchor_ids,
        stage=F.lit(stage),
        scheme=scheme,
    )


def zero() -> Column:
    """A bigint 0: a fail's ack val, an edge outside a root's tree, an aggregate's position."""
    return F.lit(0).cast("bigint")


def literal(value: str | Column) -> Column:
    """`value` as a column: a string is a literal, a column stays as it is."""
    return value if isinstance(value, Column) else F.lit(value)


def _array_of(names: Sequence[str]) -> Column:
    return F.array(*[F.lit(name) for name in names])


# A working column of ackfold's inside a stage's DataFrame: out of the app's way.
HIDDEN_PREFIX = "__ackfold_"


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


def tracked(df: DataFrame, where: str) -> DataFrame:
    """``df`` with its tuple column in the current layout; a DataFrame without one is
    refused, naming `where` (tracker.verb)."""
    if TUPLE_COLUMN not in df.columns:
        raise ValueError(
            f"{where}: the DataFrame has no {TUPLE_COLUMN} column (columns: "
            f"{df.columns}); pass tuples from spout(), emit(), explode() or aggregate(), "
            "or a table they were written to"
        )
    return layout.read_current(df, where)


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
