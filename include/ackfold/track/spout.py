"""Registering roots over DataFrames: what ``StageTracker.spout`` writes for each source
message (a ``roots`` row, its ``init`` event) and the first tuple it hands on.

Root ids, tuple ids and the init event's edges are the ones ``Tracker.spout`` derives
(``ackfold.track.sql_ids`` computes them in Spark), so both trackers register a message
under the same root.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ackfold.ledger.schema import schemes
from ackfold.ledger.schema.contract import INIT
from ackfold.track import sql_ids
from ackfold.track.columns import (
    ColumnOrName,
    as_column,
    first_tuple,
    hidden,
    literal,
    optional_string,
)
from ackfold.track.events import event_rows
from ackfold.track.layout import TUPLE_COLUMN
from ackfold.track.tuples import UNNAMED, spout_consumers_of

if TYPE_CHECKING:
    import pyarrow as pa


# The columns `Spout.rows` holds after the roots', for its init event.
INIT_COLUMNS: Final = ("init_event_id", "init_ack_val")


@dataclass(frozen=True)
class Spout:
    """What ``StageTracker.spout`` registers: the tuples for the next stage, the ``roots``
    rows and the ``init`` events (both still to be written by ``write_batch``).

    ``rows`` holds both ledger rows of each root in one: the ``roots`` columns, then its
    init event's id and ack val (``INIT_COLUMNS``), for a writer that collects them in one
    Spark job and commits them itself (``split_rows``)."""

    tuples: DataFrame
    roots: DataFrame
    rows: DataFrame
    # Built on first use: a writer of `rows` never needs it, and building it is about 140
    # calls into the JVM, every micro-batch.
    _events: Callable[[], DataFrame] = field(repr=False)

    @cached_property
    def events(self) -> DataFrame:
        """The ``init`` events, in ``ack_events``' columns."""
        return self._events()


def register_roots(
    app: str,
    stage: str,
    df: DataFrame,
    *,
    message_id: ColumnOrName,
    source: str | Column,
    source_queue: str | Column,
    attempt: ColumnOrName | int,
    origin_root_id: ColumnOrName | None,
    payload: ColumnOrName | None,
    source_position: ColumnOrName | None,
    to: Sequence[str] | None,
    id_scheme: int,
    distinct: bool = True,
) -> Spout:
    """One root per distinct message of ``df``, registered by ``stage`` of ``app`` for
    the stages ``to`` names, its ids in ``id_scheme`` (``StageTracker.spout`` documents
    the arguments). With ``distinct`` off, a message twice in ``df`` is in every frame
    twice, and no shuffle finds it: for a caller that drops the copies of the rows it
    collects (``Spout.rows``), and whose stages take copies of a tuple as one."""
    if TUPLE_COLUMN in df.columns:
        raise ValueError(
            f"the source DataFrame already has a {TUPLE_COLUMN} column: its rows are "
            "tracked tuples, not source messages; use emit() to continue their trees"
        )
    if isinstance(attempt, int) and (isinstance(attempt, bool) or attempt < 1):
        raise ValueError(f"attempt must be an int >= 1 or a column, got {attempt!r}")
    if isinstance(attempt, int) and attempt > 1 and origin_root_id is None:
        raise ValueError(f"attempt {attempt} needs the origin_root_id column of attempt 1")
    consumers = spout_consumers_of(to)
    h = hidden
    src, queue = literal(source), literal(source_queue)
    message = as_column(message_id).cast("string")
    tries = (F.lit(attempt) if isinstance(attempt, int) else as_column(attempt)).cast("int")
    origin = (F.lit(None) if origin_root_id is None else as_column(origin_root_id)).cast("bigint")
    key = F.concat(src, F.lit(":"), queue, F.lit(":"), message)
    base = (
        df.withColumn(h("root"), sql_ids.root_id(app, key, tries, origin))
        .withColumn(h("attempt"), tries)
        .withColumn(h("origin"), origin)
    )
    if distinct:
        # A message delivered twice in one batch is one root, as in Tracker.spout.
        base = base.dropDuplicates([h("root")])
    root = F.col(h("root"))
    scheme = F.lit(id_scheme)
    first = sql_ids.spout_tuple_id(root, id_scheme)
    tuples = base.withColumn(TUPLE_COLUMN, first_tuple(stage, root, consumers, scheme)).drop(
        h("root"), h("attempt"), h("origin")
    )
    tries_col = F.col(h("attempt"))
    root_columns = (
        root.alias("root_id"),
        F.lit(app).alias("app"),
        tries_col.alias("attempt"),
        F.when(tries_col == 1, root).otherwise(F.col(h("origin"))).alias("origin_root_id"),
        src.alias("source"),
        queue.alias("source_queue"),
        message.alias("source_message_id"),
        optional_string(source_position).alias("source_position"),
        optional_string(payload).alias("payload"),
        F.current_timestamp().alias("ingested_at"),
        scheme.alias("id_scheme"),
    )
    # The init event carries the first tuple's edge for each consumer (pseudo-anchor 0).
    if consumers == (UNNAMED,):
        init_val = sql_ids.one_edge(first, root, id_scheme)
    else:
        init_val = sql_ids.xor_of(
            *[sql_ids.edge_id(first, root, F.lit(0), F.lit(c), id_scheme) for c in consumers]
        )
    init_columns = (
        sql_ids.event_id(app, root, INIT, stage, first).alias(INIT_COLUMNS[0]),
        init_val.cast("bigint").alias(INIT_COLUMNS[1]),
    )
    return Spout(
        tuples=tuples,
        roots=base.select(*root_columns),
        rows=base.select(*root_columns, *init_columns),
        _events=lambda: event_rows(app, stage, base, INIT, root, first, init_val),
    )


def split_rows(rows: pa.Table, *, app: str, stage: str) -> tuple[pa.Table, pa.Table]:
    """The ``roots`` rows and the ``init`` events of ``Spout.rows`` collected as Arrow
    (``DataFrame.toArrow()``), each in the contract's columns, one per root (the first
    row of each): what ``Tracker.spout`` would have drained for the same messages."""
    import pyarrow as pa

    firsts: dict[int, int] = {}
    for index, root in enumerate(rows.column("root_id").to_pylist()):
        firsts.setdefault(root, index)
    if len(firsts) < rows.num_rows:
        rows = rows.take(sorted(firsts.values()))
    n = rows.num_rows
    roots = rows.select([name for name in rows.column_names if name not in INIT_COLUMNS])
    events = pa.table(
        {
            "event_id": rows.column(INIT_COLUMNS[0]),
            "app": pa.array([app] * n, pa.string()),
            "root_id": rows.column("root_id"),
            "kind": pa.array([INIT] * n, pa.string()),
            "ack_val": rows.column(INIT_COLUMNS[1]),
            "stage": pa.array([stage] * n, pa.string()),
            "event_time": rows.column("ingested_at"),
            "reason": pa.nulls(n, pa.string()),
        }
    )
    return roots, events


def first_tuples(
    stage: str, roots: DataFrame, to: Sequence[str] | None, *, where: str
) -> DataFrame:
    """The first tuples of roots that ``stage`` registered for ``to`` earlier, one per row
    of ``roots`` (rows of the ``roots`` table), as ``register_roots`` made them, each in
    its root's id scheme (``roots.id_scheme``; a table without the column holds roots of
    the text scheme); `where` (tracker.verb) names the caller in the error."""
    if "root_id" not in roots.columns:
        raise ValueError(
            f"{where} needs rows of the roots table (a root_id column); got columns {roots.columns}"
        )
    recorded = F.col("id_scheme") if "id_scheme" in roots.columns else F.lit(None)
    scheme = F.coalesce(recorded.cast("int"), F.lit(schemes.TEXT))
    return roots.withColumn(
        TUPLE_COLUMN, first_tuple(stage, F.col("root_id"), spout_consumers_of(to), scheme)
    )
