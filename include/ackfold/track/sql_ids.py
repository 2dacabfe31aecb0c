"""The ids of ``ackfold.ledger.schema.ids`` as Spark SQL columns: the same formulas, computed
in the JVM.

Each function here returns a ``Column`` equal, row by row, to its namesake in ``ids.py``
or ``schemes.py``: ``xxhash64(concat_ws('\\x1f', ...))`` (the text scheme) or
``xxhash64(a, b, ...)`` (the numeric one) with 0 mapped to 1 for the 64-bit ids, and
``md5(concat_ws('\\x1f', ...))`` for event ids. No Python UDF runs: the Tracker's formulas
stay on the JVM's hot path. Arguments are ``Column`` expressions; a plain ``str`` or ``int``
is a literal value, never a column name. ``scheme`` is a tuple's id scheme, a column (a
null is the text scheme) or an int.

Example:
    >>> from pyspark.sql import functions as F
    >>> from ackfold.track import sql_ids
    >>> from ackfold.ledger.schema import ids
    >>> row = spark.range(1).select(
    ...     sql_ids.edge_id(F.lit(3), F.lit(5), F.lit(0), F.lit("")).alias("e")
    ... ).first()
    >>> row.e == ids.edge_id(3, 5, 0, "")
    True
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from ackfold.ledger.schema import ids, schemes
from ackfold.ledger.schema.contract import ACK
from ackfold.track.reuse import reused

Part = Column | str | int
Scheme = Column | int


def _text(part: Part) -> Column:
    if isinstance(part, Column):
        return part.cast("string")
    # bool is an int, but Spark writes "true" where Python writes "True": refuse it, as ids does.
    if isinstance(part, bool) or not isinstance(part, str | int):
        raise TypeError(f"id parts must be Column, str or int, got {type(part).__name__}")
    return F.lit(str(part))


def hash64(*parts: Part) -> Column:
    """``ids.hash64`` in SQL: ``xxhash64(concat_ws('\\x1f', parts...))``, 0 mapped to 1.

    Example:
        >>> from ackfold.ledger.schema import ids
        >>> spark.range(1).select(hash64("root", "app", 7).alias("h")).first().h == (
        ...     ids.hash64("root", "app", 7))
        True
    """
    return _hash_texts(*[_text(part) for part in parts])


def _hash_texts(*texts: Column) -> Column:
    # An array<string> text is spliced in element by element, as concat_ws does: that is
    # how a variable number of anchor ids enters a tuple id.
    h = F.xxhash64(F.concat_ws(ids.SEP, *texts))
    return F.when(h == 0, F.lit(1).cast("bigint")).otherwise(h)


@reused
def root_id(app: str, source_key: Column, attempt: Column, origin_root_id: Column) -> Column:
    """``ids.root_id`` in SQL: from the source key on attempt 1, else from the origin root.

    Rows that ``ids.root_id`` would refuse (attempt < 1, attempt > 1 without an origin, an
    attempt 1 whose origin is another root, a null key) fail the Spark job with that message.

    Example:
        >>> from pyspark.sql import functions as F
        >>> from ackfold.ledger.schema import ids
        >>> r = spark.range(1).select(root_id(
        ...     "orders", F.lit("sqs:in:m-1"), F.lit(1), F.lit(None).cast("bigint")
        ... ).alias("r")).first().r
        >>> r == ids.root_id("orders", "sqs:in:m-1")
        True
    """
    first = hash64("root", app, source_key)
    later = hash64("attempt", origin_root_id, attempt)
    return (
        F.when(
            attempt.isNull() | (attempt < 1), _error("attempt must be an int >= 1, got ", attempt)
        )
        .when(source_key.isNull(), _error("a root needs a source key: message_id is null"))
        .when(
            attempt == 1,
            F.when(
                F.instr(source_key, ids.SEP) > 0,
                _error("source key contains the separator \\x1f: ", source_key),
            )
            .when(
                origin_root_id.isNotNull() & (origin_root_id != first),
                _error(
                    "attempt 1 is its own origin: origin_root_id ",
                    origin_root_id,
                    " differs from the derived root id ",
                    first,
                ),
            )
            .otherwise(first),
        )
        .when(
            origin_root_id.isNull(),
            _error("attempt ", attempt, " needs the origin_root_id of attempt 1"),
        )
        .otherwise(later)
    )


def hash_numbers(*parts: Column | int) -> Column:
    """``schemes.hash_numbers`` in SQL: Spark's ``xxhash64`` of the parts, 0 mapped to 1; an
    int is a bigint literal, a column is hashed as its type says (bigint or string).

    Example:
        >>> from ackfold.ledger.schema import schemes
        >>> spark.range(1).select(hash_numbers(2, F.lit(-5).cast("bigint")).alias("h")
        ...                       ).first().h == schemes.hash_numbers(2, -5)
        True
    """
    columns = [F.lit(p).cast("bigint") if isinstance(p, int) else p for p in parts]
    h = F.xxhash64(*columns)
    return F.when(h == 0, F.lit(1).cast("bigint")).otherwise(h)


def _by_scheme(scheme: Scheme, text: Column, numeric: Column) -> Column:
    """``numeric`` for rows of the numeric scheme, else ``text`` (a null scheme too)."""
    if isinstance(scheme, int):
        return numeric if schemes.check_scheme(scheme) == schemes.NUMERIC else text
    return F.when(scheme == F.lit(schemes.NUMERIC), numeric).otherwise(text)


@reused
def spout_tuple_id(root_id: Column, scheme: Scheme = schemes.TEXT) -> Column:
    """``schemes.spout_tuple_id`` in SQL: the first tuple of a root."""
    return _by_scheme(scheme, hash64("spout", root_id), hash_numbers(schemes.SPOUT_TAG, root_id))


@reused
def tuple_id(
    stage: str, position: Column, anchor_ids: Column, scheme: Scheme = schemes.TEXT
) -> Column:
    """``schemes.tuple_id`` in SQL; ``anchor_ids`` is an ``array<bigint>``, in anchor order.

    Example:
        >>> from pyspark.sql import functions as F
        >>> from ackfold.ledger.schema import schemes
        >>> anchors = F.array(F.lit(11), F.lit(12)).cast("array<bigint>")
        >>> row = spark.range(1).select(
        ...     tuple_id("parse", F.lit(0), anchors).alias("text"),
        ...     tuple_id("parse", F.lit(0), anchors, F.lit(2)).alias("numeric"),
        ... ).first()
        >>> (row.text, row.numeric) == (schemes.tuple_id("parse", 0, [11, 12], 1),
        ...                             schemes.tuple_id("parse", 0, [11, 12], 2))
        True
    """
    texts = [_text("tuple"), _text(stage), _text(position), anchor_ids.cast("array<string>")]
    numbers = hash_numbers(
        schemes.TUPLE_TAG,
        schemes.stage_key(stage),
        position.cast("bigint"),
        anchor_ids.cast("array<bigint>"),
    )
    return _by_scheme(scheme, _hash_texts(*texts), numbers)


@reused
def edge_id(
    tuple_id: Column,
    root_id: Column,
    anchor_index: Column,
    consumer: Column,
    scheme: Scheme = schemes.TEXT,
) -> Column:
    """``schemes.edge_id`` in SQL: one tuple, in one root's tree, via one anchor, to one
    consumer (the general form)."""
    numbers = hash_numbers(
        schemes.EDGE_TAG,
        tuple_id.cast("bigint"),
        root_id.cast("bigint"),
        anchor_index.cast("bigint"),
        consumer.cast("string"),
    )
    return _by_scheme(scheme, hash64("edge", tuple_id, root_id, anchor_index, consumer), numbers)


@reused
def one_edge(tuple_id: Column, root_id: Column, scheme: Scheme) -> Column:
    """``schemes.one_edge`` in SQL: the one edge of a short tuple."""
    return _by_scheme(scheme, hash64("edge", tuple_id, root_id, 0, ""), tuple_id)


@reused
def event_id(app: str, root_id: Column, kind: str, stage: str, tuple_id: Column) -> Column:
    """``ids.event_id`` in SQL: ``md5`` of what the event says, as lowercase hex."""
    parts = [_text(app), _text(root_id), _text(kind), _text(stage), _text(tuple_id)]
    return F.md5(F.concat_ws(ids.SEP, *parts))


def compact_event_id(
    app: str, root_id: Column, stage: str, count: Column, signature: Column
) -> Column:
    """``ids.compact_event_id`` in SQL: the per-tuple id for one tuple, else ``md5`` of the
    count and the XOR of the tuple ids (``signature``).

    Example:
        >>> from pyspark.sql import functions as F
        >>> from ackfold.ledger.schema import ids
        >>> row = spark.range(1).select(
        ...     compact_event_id("wc", F.lit(5), "count", F.lit(1), F.lit(77)).alias("one"),
        ...     compact_event_id("wc", F.lit(5), "count", F.lit(2), F.lit(7)).alias("two"),
        ... ).first()
        >>> (row.one, row.two) == (ids.compact_event_id("wc", 5, "count", 1, 77),
        ...                        ids.compact_event_id("wc", 5, "count", 2, 7))
        True
    """
    head = [_text(app), _text(root_id), _text(ACK), _text(stage)]
    return F.when(count == 1, F.md5(F.concat_ws(ids.SEP, *head, _text(signature)))).otherwise(
        F.md5(F.concat_ws(ids.SEP, *head, _text(count), _text(signature)))
    )


def xor_all(values: Column) -> Column:
    """The XOR of an ``array<bigint>`` (0 for an empty array), without exploding it."""
    return F.aggregate(values, F.lit(0).cast("bigint"), lambda acc, x: acc.bitwiseXOR(x))


def xor_of(*values: Column) -> Column:
    """The XOR of a few ``bigint`` columns."""
    return reduce(lambda acc, x: acc.bitwiseXOR(x), values)


def _error(*parts: Part) -> Column:
    # raise_error fails the task with the message: the SQL twin of ids.py's ValueError.
    return F.raise_error(F.concat(*[F.coalesce(_text(p), F.lit("null")) for p in parts]))
