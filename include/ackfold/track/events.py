"""The ``ack_events`` rows a stage writes, and the edge arithmetic of their ack vals.

An ack XORs the input's own edges (for this stage as consumer) with the edges of the
children emitted from it, in one row (invariant 2): one row per input and root, or, in
compact mode, one row per root for all the inputs of the call (``ackfold.track.compact``).
A fail row carries the reason. Event ids are derived from what the event says, so a row
written twice is one event to the fold. ``StageTracker`` (``ackfold.track.stage``) calls
these; ``Tracker.ack`` and ``Tracker.fail`` are the same rules in plain Python.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ackfold.ledger.schema.contract import ACK, FAIL
from ackfold.track import folding, layout, sql_ids
from ackfold.track.columns import literal, zero
from ackfold.track.layout import TUPLE_COLUMN
from ackfold.track.reuse import reused
from ackfold.track.tuples import UNNAMED, consumers_of, sink_use_message


def ack_rows(
    app: str,
    stage: str,
    inputs: DataFrame,
    children: DataFrame | None,
    *,
    compact: bool,
    exploded: Column | None = None,
    to: Sequence[str] | None = None,
) -> DataFrame:
    """The ``ack`` events of ``stage``'s ``inputs`` (``StageTracker.ack``): each input's own
    edges XOR the edges of its children (invariant 2), per input and root, or per root if
    ``compact``. The children are the rows of ``children``, or the elements of each input's
    array ``exploded``, as ``explode(inputs, exploded, ..., to=to)`` made them."""
    t, root = F.col("t"), F.col("root_id")
    items = [exploded.alias("items")] if exploded is not None else []
    own = (
        inputs.select(F.col(TUPLE_COLUMN).alias("t"), *items)
        .select(
            "t",
            *(["items"] if items else []),
            F.explode(layout.roots_of(t)).alias("root_id"),
            _consumer_key(stage, t).alias("consumer"),
        )
        .select(
            t["id"].alias("tuple_id"),
            "root_id",
            (
                _own_value(t, root, F.col("consumer"))
                if exploded is None
                else _own_value(t, root, F.col("consumer")).bitwiseXOR(
                    _exploded_edges(stage, t, root, F.col("items"), to)
                )
            ).alias("own"),
            F.lit(None).cast("bigint").alias("edge"),
        )
    )
    if compact:
        folded = _compact_rows(app, stage, own, children)
        if children is not None:
            return folded
        # The same rows per input, for a driver that folds them itself (`folding`).
        unfolded = own.select(
            F.lit(None).cast("string").alias("event_id"),
            F.lit(app).alias("app"),
            root,
            F.lit(ACK).alias("kind"),
            F.col("own").alias("ack_val"),
            F.lit(stage).alias("stage"),
            F.current_timestamp().alias("event_time"),
            F.lit(None).cast("string").alias("reason"),
            F.col("tuple_id").alias(folding.TUPLE_ID),
        )
        return folding.remember(folded, unfolded, app=app, stage=stage)
    if children is None:
        # Each row is its input's whole ack. Copies of one input give the same event id,
        # which the fold reads once: no aggregation (no shuffle).
        return event_rows(app, stage, own, ACK, root, F.col("tuple_id"), F.col("own"))
    combined = own.unionByName(_child_edges(stage, children))
    acks = (
        combined.groupBy("tuple_id", "root_id")
        .agg(
            # Copies of one input (or one child) in the batch are one delivery: the
            # first own value and the set of edges, never an XOR over the copies.
            F.first("own", ignorenulls=True).alias("own"),
            F.collect_set("edge").alias("edges"),
        )
        .where(F.col("own").isNotNull())  # children of inputs not acked here stay pending
    )
    ack_val = F.col("own").bitwiseXOR(sql_ids.xor_all(F.col("edges")))
    return event_rows(app, stage, acks, ACK, F.col("root_id"), F.col("tuple_id"), ack_val)


def exploded_ack_value(
    stage: str, t: Column, root: Column, items: Column, to: Sequence[str] | None
) -> Column:
    """The ack val of tuple ``t`` in ``root``'s tree when ``stage`` explodes ``items`` from
    it (``explode(..., to=to)``): its own edges XOR its children's, as ``ack(exploded=)``
    computes it per input. Fails the job if ``stage`` does not consume ``t``."""
    own = _own_value(t, root, _consumer_key(stage, t))
    return own.bitwiseXOR(_exploded_edges(stage, t, root, items, to))


@reused
def checked_reason(stage: str, t: Column, reason: Column) -> Column:
    """``reason`` for failing ``t`` in ``stage``, as ``fail`` checks it: the job fails if
    ``stage`` does not consume ``t`` or the reason is empty."""
    return (
        F.when(_consumer_key(stage, t).isNull(), F.lit(None))
        .when(
            reason.isNull() | (F.trim(reason) == ""),
            F.raise_error(F.lit(f"stage {stage!r}: fail needs a non-empty reason")),
        )
        .otherwise(reason)
    )


def _compact_rows(app: str, stage: str, own: DataFrame, children: DataFrame | None) -> DataFrame:
    """One row per root: the XOR of its inputs' acks, under the id of the set of inputs.

    Without ``children`` (a sink, or an ``explode`` acked from its inputs' arrays), an
    input's ack is a function of the input: each root's distinct (input, ack) pairs are
    gathered in one aggregation, whose partial sets are built before the one shuffle, so
    only about a row per root and partition crosses it, and copies of an input count once.

    With ``children``: one shuffle, by root, then three aggregations on that partitioning
    (no exchange between them): distinct rows (copies of an input or a child count once),
    per input its own value and the XOR of its children's edges, per root the count, the
    XOR of the input ids (the set's signature) and the XOR of the acks. Edges of anchors
    that are not among the inputs are left out (they stay pending, as per tuple).
    """
    if children is None:
        pairs = F.collect_set(F.struct("tuple_id", "own")).alias("pairs")

        def xor_of(field: str) -> Column:
            return F.aggregate(F.col("pairs"), zero(), lambda acc, p: acc.bitwiseXOR(p[field]))

        folded = (
            own.groupBy("root_id")
            .agg(pairs)
            .select(
                "root_id",
                F.size("pairs").alias("n"),
                xor_of("tuple_id").alias("signature"),
                xor_of("own").alias("ack_val"),
            )
        )
    else:
        per_input = (
            own.unionByName(_child_edges(stage, children))
            .repartition("root_id")
            .dropDuplicates(["root_id", "tuple_id", "own", "edge"])
            .groupBy("root_id", "tuple_id")
            .agg(
                F.max("own").alias("own"),  # one value per input: a function of the tuple
                F.coalesce(F.bit_xor("edge"), zero()).alias("edges"),
            )
            .where(F.col("own").isNotNull())
        )
        folded = per_input.groupBy("root_id").agg(
            F.count("*").alias("n"),
            F.bit_xor("tuple_id").alias("signature"),
            F.bit_xor(F.col("own").bitwiseXOR(F.col("edges"))).alias("ack_val"),
        )
    root = F.col("root_id")
    event_id = sql_ids.compact_event_id(app, root, stage, F.col("n"), F.col("signature"))
    return _rows(app, stage, folded, event_id, root, ACK, F.col("ack_val"))


def fail_rows(app: str, stage: str, inputs: DataFrame, reason: str | Column) -> DataFrame:
    """The ``fail`` events of ``stage``'s ``inputs`` (``StageTracker.fail``): every root of
    each fails, with ``reason``."""
    why = literal(reason)
    t = F.col("t")
    failed = (
        inputs.select(F.col(TUPLE_COLUMN).alias("t"), why.alias("reason"))
        .where(_consumer_key(stage, t).isNotNull())  # checks that this stage consumes it
        .select(
            t["id"].alias("tuple_id"),
            F.explode(layout.roots_of(t)).alias("root_id"),
            F.when(
                F.col("reason").isNull() | (F.trim(F.col("reason")) == ""),
                F.raise_error(F.lit(f"stage {stage!r}: fail needs a non-empty reason")),
            )
            .otherwise(F.col("reason"))
            .alias("reason"),
        )
    )
    return event_rows(
        app, stage, failed, FAIL, F.col("root_id"), F.col("tuple_id"), zero(), F.col("reason")
    )


def event_rows(
    app: str,
    stage: str,
    frame: DataFrame,
    kind: str,
    root: Column,
    tuple_id: Column,
    ack_val: Column,
    reason: Column | None = None,
) -> DataFrame:
    """One ``ack_events`` row of ``kind`` per row of ``frame``, written by ``stage`` of ``app``;
    its event id is derived from what it says (invariant 4)."""
    event_id = sql_ids.event_id(app, root, kind, stage, tuple_id)
    return _rows(app, stage, frame, event_id, root, kind, ack_val, reason)


def _rows(
    app: str,
    stage: str,
    frame: DataFrame,
    event_id: Column,
    root: Column,
    kind: str,
    ack_val: Column,
    reason: Column | None = None,
) -> DataFrame:
    rows = frame.select(
        event_id.alias("event_id"),
        F.lit(app).alias("app"),
        root.alias("root_id"),
        F.lit(kind).alias("kind"),
        ack_val.cast("bigint").alias("ack_val"),
        F.lit(stage).alias("stage"),
        F.current_timestamp().alias("event_time"),
        (reason if reason is not None else F.lit(None)).cast("string").alias("reason"),
    )
    # A driver that collects the rows stamps the time itself, once a batch (`folding`).
    return folding.stamp_on_driver(rows)


@reused
def _consumer_key(stage: str, t: Column) -> Column:
    """The consumer whose edges ``stage`` acks, as ``Tuple.consumer_key``."""
    consumers = t["tree"]["consumers"]
    return (
        F.when(layout.is_short(t), F.lit(UNNAMED))
        .when(consumers == F.array(F.lit(UNNAMED)), F.lit(UNNAMED))
        .when(F.array_contains(consumers, stage), F.lit(stage))
        .when(F.size(consumers) == 0, _sink_error(stage, t["id"]))
        .otherwise(
            F.raise_error(
                F.concat(
                    F.lit(f"stage {stage!r} is not a consumer of tuple "),
                    t["id"].cast("string"),
                    F.lit(" (it was emitted to "),
                    F.array_join(consumers, ", "),
                    F.lit(")"),
                )
            )
        )
    )


def _sink_error(stage: str, tuple_id: Column) -> Column:
    """``Tuple.consumer_key``'s error for a sink's output (``to=[]``), as a failing column."""
    before, _, after = sink_use_message(stage, "\x00").partition("\x00")
    return F.raise_error(F.concat(F.lit(before), tuple_id.cast("string"), F.lit(after)))


def _child_edges(stage: str, children: DataFrame) -> DataFrame:
    """Rows (anchor tuple id, root, edge): each child's edges, by the anchor they hang on.

    A short child has one edge, on its one anchor in its one root's tree; the general
    form has one per anchor, root of that anchor and consumer.
    """
    c = F.col("c")
    tree = c["tree"]
    scheme = layout.scheme_of(c)

    def edge(anchor: Column, root: Column, k: Column, consumer: Column) -> Column:
        return F.struct(
            anchor.alias("tuple_id"),
            root.alias("root_id"),
            sql_ids.edge_id(c["id"], root, k, consumer, scheme).alias("edge"),
        )

    general = F.flatten(
        F.transform(
            tree["anchors"],
            lambda anchor, k: F.flatten(
                F.transform(
                    tree["anchor_roots"][k],
                    lambda root: F.transform(
                        tree["consumers"], lambda consumer: edge(anchor, root, k, consumer)
                    ),
                )
            ),
        )
    )
    short = F.array(
        F.struct(
            c["anchor"].alias("tuple_id"),
            c["root"].alias("root_id"),
            sql_ids.one_edge(c["id"], c["root"], scheme).alias("edge"),
        )
    )
    return (
        children.select(F.col(TUPLE_COLUMN).alias("c"))
        .where(
            F.when(c["stage"] == stage, F.lit(True)).otherwise(
                F.raise_error(
                    F.concat(
                        F.lit(f"stage {stage!r} cannot ack with children emitted by "),
                        F.coalesce(c["stage"], F.lit("null")),
                    )
                )
            )
        )
        .select(F.explode(F.when(layout.is_short(c), short).otherwise(general)).alias("e"))
        .select(
            "e.tuple_id",
            "e.root_id",
            F.lit(None).cast("bigint").alias("own"),
            "e.edge",
        )
    )


def _exploded_edges(
    stage: str, t: Column, root: Column, items: Column, to: Sequence[str] | None
) -> Column:
    """The XOR of the edges, in ``root``'s tree, of the children ``stage``'s ``explode``
    emits from tuple ``t`` (one per element of ``items``, at its index, ``to`` those
    stages), computed from ``t`` alone: as ``columns.child_of`` derives them, short where
    ``t`` has one root and the children go to any one stage."""
    consumers = consumers_of(to)
    if not consumers:  # a sink's outputs (to=[]) carry no edges: no loop over the items
        return zero()
    scheme = layout.scheme_of(t)
    one_root = F.size(layout.roots_of(t)) == 1

    def edges(position: Column) -> Column:
        child = sql_ids.tuple_id(stage, position, F.array(t["id"]), scheme)
        each = [sql_ids.edge_id(child, root, F.lit(0), F.lit(c), scheme) for c in consumers]
        if consumers == (UNNAMED,):
            return F.when(one_root, sql_ids.one_edge(child, root, scheme)).otherwise(each[0])
        return sql_ids.xor_of(*each) if each else zero()

    count = F.coalesce(F.size(items), F.lit(0))
    every = F.aggregate(
        F.sequence(F.lit(0), count - 1), zero(), lambda acc, p: acc.bitwiseXOR(edges(p))
    )
    return F.when(items.isNotNull() & (count > 0), every).otherwise(zero())


def _own_value(t: Column, root: Column, consumer: Column) -> Column:
    """``Tuple.value``: the XOR of the tuple's edges in ``root``'s tree, one per anchor."""
    scheme = layout.scheme_of(t)
    edges = F.transform(
        t["tree"]["anchor_roots"],
        lambda roots_k, k: F.when(
            F.array_contains(roots_k, root), sql_ids.edge_id(t["id"], root, k, consumer, scheme)
        ).otherwise(zero()),
    )
    short = sql_ids.one_edge(t["id"], root, scheme)
    return F.when(layout.is_short(t), short).otherwise(sql_ids.xor_all(edges))
