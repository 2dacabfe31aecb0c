"""The layout of ``_ackfold``, the struct a tracked DataFrame carries, and its versions.

Layout 2 keeps the common case in three numbers and the stage, without arrays: a tuple
of one root, reached through one anchor (or a spout's pseudo-anchor), that any one stage
consumes, has ``root`` and ``anchor`` set and ``tree`` null. Every other tuple (several
roots, several anchors, named consumers, a sink's output) has ``root`` null and its whole
tree in ``tree``: what ``tuples.Tuple`` carries plus ``anchors``, the ids of the tuples it
was emitted from (empty for a spout tuple), so a stage can compute its inputs' acks from
its children. Layout 1 (ackfold 0.1) carried the tree's arrays on every tuple; tables
written so are read as layout 2, and appended to in layout 1 (``matching``). See
``docs/decisions/tuple-layout.md``.

The views below (``roots_of``, ``anchor_roots_of``, ...) read either form of a layout-2
struct as layout 1 did; the hot paths (``ackfold.track.columns``, ``ackfold.track.events``)
test ``root`` first and touch arrays only for the general case.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from ackfold.ledger.schema.schemes import TEXT
from ackfold.track.tuples import UNNAMED, Tuple

TUPLE_COLUMN: Final = "_ackfold"
LAYOUT: Final = 2
TREE_DDL: Final = (
    "roots ARRAY<BIGINT>, anchor_roots ARRAY<ARRAY<BIGINT>>, "
    "consumers ARRAY<STRING>, anchors ARRAY<BIGINT>"
)
# The tuple's id scheme (`ackfold.ledger.schema.schemes`): a field that may follow the fields of
# any layout. A column without it, or a null in it (rows written before it was added to
# their table), is the text scheme.
SCHEME: Final = "scheme"
TUPLE_DDL: Final = (
    f"id BIGINT, root BIGINT, anchor BIGINT, stage STRING, tree STRUCT<{TREE_DDL}>, {SCHEME} INT"
)
TUPLE_TYPE: Final = f"struct<{TUPLE_DDL}>"
LAYOUT_1_DDL: Final = (
    "id BIGINT, roots ARRAY<BIGINT>, anchor_roots ARRAY<ARRAY<BIGINT>>, "
    f"consumers ARRAY<STRING>, anchors ARRAY<BIGINT>, stage STRING, {SCHEME} INT"
)
# The field names of each layout, in order: how a stored column tells its layout.
FIELDS: Final = {
    1: ("id", "roots", "anchor_roots", "consumers", "anchors", "stage"),
    2: ("id", "root", "anchor", "stage", "tree"),
}


def layout_of(dtype: DataType, where: str = TUPLE_COLUMN) -> int:
    """The layout of an ``_ackfold`` column of type ``dtype`` (with or without the
    ``scheme`` field after its own); a ValueError, naming ``where``, for a column that no
    layout ackfold reads describes."""
    names = tuple(f.name for f in dtype.fields) if isinstance(dtype, StructType) else ()
    if names[-1:] == (SCHEME,):
        names = names[:-1]
    for layout, fields in FIELDS.items():
        if names == fields:
            return layout
    raise ValueError(
        f"{where}: the {TUPLE_COLUMN} column is {dtype.simpleString()}, which is no tuple "
        f"layout this ackfold reads (layout 1: {', '.join(FIELDS[1])}; layout 2: "
        f"{', '.join(FIELDS[2])}; either followed by {SCHEME}). A table written by a newer "
        f"ackfold needs that version; a column of another origin must be renamed: "
        f"{TUPLE_COLUMN} is ackfold's"
    )


def has_scheme(dtype: DataType) -> bool:
    """Whether an ``_ackfold`` column of type ``dtype`` carries its tuples' id scheme."""
    return isinstance(dtype, StructType) and SCHEME in dtype.fieldNames()


def is_current(schema: StructType) -> bool:
    """Whether a table of ``schema`` takes tuples as they are now (layout 2 and ``scheme``,
    or no ``_ackfold`` column at all): nothing to rewrite before an append."""
    if TUPLE_COLUMN not in schema.fieldNames():
        return True
    dtype = schema[TUPLE_COLUMN].dataType
    return layout_of(dtype) == LAYOUT and has_scheme(dtype)


def current(column: Column, dtype: DataType, where: str = TUPLE_COLUMN) -> Column:
    """``column`` (of type ``dtype``) in the current form (layout 2 and ``scheme``): itself,
    or an older column rewritten (the text scheme where it has none)."""
    layout = layout_of(dtype, where)
    scheme = column[SCHEME] if has_scheme(dtype) else F.lit(TEXT)
    if layout == LAYOUT:
        return column if has_scheme(dtype) else column.withField(SCHEME, scheme)
    return pack(
        column["id"],
        column["roots"],
        column["anchor_roots"],
        column["consumers"],
        column["anchors"],
        column["stage"],
        scheme,
    )


def read_current(df: DataFrame, where: str) -> DataFrame:
    """``df`` with its ``_ackfold`` column in the current form, as every verb reads its
    inputs."""
    dtype = df.schema[TUPLE_COLUMN].dataType
    if layout_of(dtype, where) == LAYOUT and has_scheme(dtype):
        return df
    return df.withColumn(TUPLE_COLUMN, current(F.col(TUPLE_COLUMN), dtype, where))


def matching(frame: DataFrame, target: StructType | None) -> DataFrame:
    """``frame`` with its ``_ackfold`` column in the layout of the ``target`` table's
    (None: a new table, which takes the frame's): a table keeps the layout it started
    with, so an app upgraded in place goes on appending to its outputs. The ``scheme``
    field goes with it: the writer adds it to a table that lacks it first
    (``ackfold.track.write``)."""
    if target is None or TUPLE_COLUMN not in target.fieldNames():
        return frame
    if TUPLE_COLUMN not in frame.columns:
        return frame
    wanted = layout_of(target[TUPLE_COLUMN].dataType, f"the output table's {TUPLE_COLUMN}")
    frame = read_current(frame, "the output")
    if wanted == LAYOUT:
        return frame
    t = F.col(TUPLE_COLUMN)
    layout_1 = F.struct(
        t["id"].alias("id"),
        roots_of(t).alias("roots"),
        anchor_roots_of(t).alias("anchor_roots"),
        consumers_of_tuple(t).alias("consumers"),
        anchors_of(t).alias("anchors"),
        t["stage"].alias("stage"),
        t[SCHEME].alias(SCHEME),
    )
    return frame.withColumn(TUPLE_COLUMN, layout_1.cast(f"struct<{LAYOUT_1_DDL}>"))


def scheme_of(t: Column) -> Column:
    """The tuple's id scheme: its ``scheme`` field, the text scheme where that is null
    (rows written before the field was added to their table)."""
    return F.coalesce(t[SCHEME], F.lit(TEXT))


def pack(
    tuple_id: Column,
    roots: Column,
    anchor_roots: Column,
    consumers: Column,
    anchors: Column,
    stage: Column,
    scheme: Column,
) -> Column:
    """A layout-2 struct from the general form's parts: the short form where it applies."""
    one_root = F.get(anchor_roots, 0)
    common = (
        (F.size(anchor_roots) == 1)
        & (F.size(one_root) == 1)
        & (F.size(anchors) <= 1)
        & (consumers == F.array(F.lit(UNNAMED)))
    )
    tree = F.struct(
        roots.alias("roots"),
        anchor_roots.alias("anchor_roots"),
        consumers.alias("consumers"),
        anchors.alias("anchors"),
    )
    return struct(
        tuple_id,
        root=F.when(common, F.get(one_root, 0)),
        anchor=F.when(common, F.get(anchors, 0)),
        stage=stage,
        tree=F.when(~common, tree),
        scheme=scheme,
    )


def struct(
    tuple_id: Column, *, root: Column, anchor: Column, stage: Column, tree: Column, scheme: Column
) -> Column:
    """A struct of these fields in the current form, typed as ``TUPLE_DDL`` says."""
    return F.struct(
        tuple_id.alias("id"),
        root.alias("root"),
        anchor.alias("anchor"),
        stage.alias("stage"),
        tree.alias("tree"),
        scheme.alias(SCHEME),
    ).cast(TUPLE_TYPE)


def is_short(t: Column) -> Column:
    """True for a tuple in the short form (one root, one anchor, any one consumer)."""
    return t["root"].isNotNull()


def roots_of(t: Column) -> Column:
    """The tuple's roots, as layout 1 stored them."""
    return F.when(is_short(t), F.array(t["root"])).otherwise(t["tree"]["roots"])


def anchor_roots_of(t: Column) -> Column:
    """The roots of each of the tuple's anchors, as layout 1 stored them."""
    return F.when(is_short(t), F.array(F.array(t["root"]))).otherwise(t["tree"]["anchor_roots"])


def anchors_of(t: Column) -> Column:
    """The ids of the tuple's anchors (empty for a spout tuple), as layout 1 stored them."""
    short = F.when(t["anchor"].isNotNull(), F.array(t["anchor"])).otherwise(
        F.array().cast("array<bigint>")
    )
    return F.when(is_short(t), short).otherwise(t["tree"]["anchors"])


def consumers_of_tuple(t: Column) -> Column:
    """The tuple's consumers, as layout 1 stored them."""
    return F.when(is_short(t), F.array(F.lit(UNNAMED))).otherwise(t["tree"]["consumers"])


def as_tuple(value: object) -> Tuple:
    """The ``tuples.Tuple`` of one collected ``_ackfold`` struct (a ``Row``), of either layout.

    Example:
        >>> from ackfold.track.stage import StageTracker
        >>> from ackfold.track.tracker import Tracker
        >>> rows = StageTracker("orders", "spout").spout(
        ...     spark.createDataFrame([("m-1",)], "id string"), message_id="id", source="sqs"
        ... ).tuples.collect()
        >>> as_tuple(rows[0]["_ackfold"]) == Tracker("orders").spout("m-1", source="sqs")
        True
    """
    row = value.asDict(recursive=True) if hasattr(value, "asDict") else value
    if not isinstance(row, Mapping):
        raise TypeError(f"expected an {TUPLE_COLUMN} struct (a Row), got {type(value).__name__}")
    if "roots" in row:  # layout 1
        tree = row
    elif row["root"] is not None:
        tree = {"roots": [row["root"]], "anchor_roots": [[row["root"]]], "consumers": [UNNAMED]}
    else:
        tree = row["tree"]
    return Tuple(
        id=row["id"],
        roots=tuple(tree["roots"]),
        anchor_roots=tuple(frozenset(roots) for roots in tree["anchor_roots"]),
        consumers=tuple(tree["consumers"]),
        stage=row["stage"],
        scheme=row.get(SCHEME) or TEXT,
    )
