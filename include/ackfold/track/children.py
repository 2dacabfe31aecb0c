"""A stage's children, anchored to its inputs (Storm's `emit` with anchors): `emit` one to
one, `explode` one to many, `aggregate` many to one. `StageTracker` (`ackfold.track.stage`)
has these verbs; `to` names the stages a child goes to, and `to=[]` makes a sink's output,
which no stage consumes."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ackfold.track.columns import (
    ColumnOrName,
    as_column,
    child_of,
    child_tuple,
    hidden,
    position_column,
    require_anchors,
    tracked,
    zero,
)
from ackfold.track.layout import TUPLE_COLUMN, current


class ChildVerbs:
    """The verbs that make a stage's children; `stage` names the stage they come from."""

    stage: str

    def emit(
        self,
        df: DataFrame,
        *,
        anchors: Sequence[ColumnOrName] = (TUPLE_COLUMN,),
        position: Column | int = 0,
        to: Sequence[str] | None = None,
    ) -> DataFrame:
        """One child per row of ``df``, anchored to the tuples in the ``anchors`` columns.

        The child replaces ``_ackfold`` (anchor columns given by name are dropped). Use
        several anchors for a join: a child of tuples of several roots belongs to all their
        trees; the same anchor twice is two anchorings, as in Storm. ``position`` tells
        apart siblings of one stage from the same anchors (``explode`` numbers them).
        ``to`` names the stages the child goes to, each of which acks it (None: any one
        stage); ``to=[]`` makes a sink's output, which no stage consumes and no tree waits
        for (``aggregate`` shows one).

        Example:
            >>> from ackfold.track.stage import StageTracker
            >>> spout = StageTracker("orders", "spout").spout(
            ...     spark.createDataFrame([("m-1", 3)], "id string, n int"),
            ...     message_id="id", source="sqs")
            >>> doubled = StageTracker("orders", "double").emit(
            ...     spout.tuples.withColumn("n", F.col("n") * 2))
            >>> doubled.select("n", "_ackfold.stage").first()
            Row(n=6, stage='double')
        """
        where = f"{self!r}.emit"
        require_anchors(df, anchors, where)
        tuples = [_current_anchor(df, anchor, where) for anchor in anchors]
        at = position_column(position)
        child = (
            child_of(self.stage, tuples[0], at, to)
            if len(tuples) == 1
            else child_tuple(self.stage, F.array(*tuples), at, to)
        )
        named = {a for a in anchors if isinstance(a, str) and a != TUPLE_COLUMN}
        return df.withColumn(TUPLE_COLUMN, child).drop(*named)

    def explode(
        self,
        df: DataFrame,
        items: ColumnOrName,
        name: str,
        *,
        to: Sequence[str] | None = None,
        position: str | None = None,
    ) -> DataFrame:
        """One child per element of the array ``items`` of each row, in column ``name``
        (and its index in column ``position``, if named).

        The i-th element is the child at position i of the row's tuple (``posexplode``),
        exactly as ``Tracker.emit`` numbers siblings. A row with an empty or null array has
        no children; its ack still goes out. ``to`` as in ``emit``. ``ack(rows,
        exploded=items)`` acks the rows with these children without reading them.

        Example:
            >>> from ackfold.track.stage import StageTracker
            >>> spout = StageTracker("wc", "spout").spout(
            ...     spark.createDataFrame([("m-1", "a b")], "id string, text string"),
            ...     message_id="id", source="test")
            >>> words = StageTracker("wc", "split").explode(
            ...     spout.tuples, F.split("text", " "), "word", position="at")
            >>> [(row.at, row.word) for row in words.collect()]
            [(0, 'a'), (1, 'b')]
        """
        df = tracked(df, f"{self!r}.explode")
        pos = position or hidden("position")
        exploded = df.select("*", F.posexplode(as_column(items)).alias(pos, name))
        child = child_of(self.stage, F.col(TUPLE_COLUMN), F.col(pos), to)
        out = exploded.withColumn(TUPLE_COLUMN, child)
        return out if position else out.drop(pos)

    def aggregate(
        self,
        df: DataFrame,
        by: ColumnOrName | Sequence[ColumnOrName],
        *aggs: Column,
        to: Sequence[str] | None = None,
    ) -> DataFrame:
        """One child per group of ``df.groupBy(by)``, anchored to every tuple of the group.

        Anchors are sorted by tuple id, so the child's id does not depend on the shuffle
        order; a group spans as many roots as its inputs do. Inside ``foreachBatch`` this
        aggregates one micro-batch. ``to`` as in ``emit``: a stage that writes the groups
        as its final output, read by no tracked stage, passes ``to=[]``, or every root
        would wait for an ack that never comes.

        Example:
            >>> from ackfold.track.stage import StageTracker
            >>> spout = StageTracker("wc", "spout").spout(
            ...     spark.createDataFrame([("m-1", "a"), ("m-2", "a")], "id string, w string"),
            ...     message_id="id", source="test")
            >>> counts = StageTracker("wc", "count").aggregate(
            ...     spout.tuples, "w", F.count("*").alias("n"))
            >>> row = counts.first()
            >>> row.n, len(row._ackfold.tree.roots), len(row._ackfold.tree.anchors)
            (2, 2, 2)

        The same counts as a sink's final table: acking the words completes both roots.

            >>> count = StageTracker("wc", "count")
            >>> final = count.aggregate(spout.tuples, "w", F.count("*").alias("n"), to=[])
            >>> acc = 0
            >>> for e in spout.events.union(count.ack(spout.tuples, final)).collect():
            ...     acc ^= e.ack_val
            >>> acc
            0
        """
        df = tracked(df, f"{self!r}.aggregate")
        keys = [by] if isinstance(by, str | Column) else list(by)
        anchors = hidden("anchors")
        # A struct sorts by its first field, the tuple id: no comparator to interpret.
        grouped = df.groupBy(*keys).agg(
            *aggs, F.array_sort(F.collect_list(TUPLE_COLUMN)).alias(anchors)
        )
        child = child_tuple(self.stage, F.col(anchors), zero(), to)
        return grouped.withColumn(TUPLE_COLUMN, child).drop(anchors)


def _current_anchor(df: DataFrame, anchor: ColumnOrName, where: str) -> Column:
    """An anchor column of ``df`` (a name or an expression) in the current layout."""
    column = as_column(anchor)
    dtype = (
        df.schema[anchor].dataType
        if isinstance(anchor, str)
        else df.select(column).schema[0].dataType
    )
    return current(column, dtype, where)
