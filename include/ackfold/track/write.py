"""Writing a micro-batch to the ledger: every output table, then ``roots``, then all the
batch's events in one commit to ``ack_events``.

Each append carries ``txnAppId`` (the writer id) and ``txnVersion`` (the batch id), so
Delta skips a table this batch already reached: a re-run writes what a crash left out and
nothing twice. Acks go last because an ack claims its outputs are durable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce

from pyspark.sql import DataFrame, SparkSession

from ackfold.ledger.conflicts import retry_conflicts
from ackfold.ledger.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.spark import is_connect
from ackfold.track.tracker import EVENT_COLUMNS, ROOT_COLUMNS


def append_batch(
    ledger: Ledger,
    batch_id: int | None,
    *,
    app: str,
    stage: str,
    writer_id: str | None,
    query: str | None = None,
    outputs: Mapping[str, DataFrame] | None,
    roots: DataFrame | None,
    events: Sequence[DataFrame],
) -> None:
    """Append a micro-batch's outputs, roots and events, in that order, each idempotently
    (``StageTracker.write_batch`` checks the arguments and documents the order)."""
    frames = [*(outputs or {}).values(), *([roots] if roots is not None else []), *events]
    if not frames:
        return
    spark = frames[0].sparkSession
    writer = (
        _txn_app_id(spark, batch_id, app=app, stage=stage, writer_id=writer_id, query=query)
        if batch_id is not None
        else None
    )
    ledger.create(spark, (ACK_EVENTS, ROOTS))
    for path, frame in (outputs or {}).items():
        _append(frame, path, writer, batch_id)
    if roots is not None:
        _append(roots.select(*ROOT_COLUMNS), ledger.path(ROOTS), writer, batch_id)
    if events:
        union = reduce(DataFrame.unionByName, [e.select(*EVENT_COLUMNS) for e in events])
        # Two verbs can say the same thing (an input passed twice): one row per event.
        deduped = union.dropDuplicates(["event_id"])
        _append(deduped, ledger.path(ACK_EVENTS), writer, batch_id)


def _txn_app_id(
    spark: SparkSession,
    batch_id: int,
    *,
    app: str,
    stage: str,
    writer_id: str | None,
    query: str | None,
) -> str:
    """The ``txnAppId`` of this batch's writes: ``writer_id``, else
    ``ackfold/<app>/<stage>/<streaming query id>`` (see ``StageTracker``)."""
    base = f"ackfold/{app}/{stage}"
    if is_connect(spark):
        if writer_id is not None:
            return writer_id
        found = connect_query_id(spark, query or query_name(app, stage), app, stage)
        return f"{base}/{found}" if found else base
    context = spark.sparkContext
    # Set by Spark on the thread running a micro-batch, which calls foreachBatch.
    running = context.getLocalProperty("streaming.sql.batchId")
    if running is not None and running != str(batch_id):
        raise ValueError(
            f"write_batch got batch_id {batch_id} inside micro-batch {running}: pass the "
            "batch id that foreachBatch gave your function"
        )
    if writer_id is not None:
        return writer_id
    query = context.getLocalProperty("sql.streaming.queryId")
    return f"{base}/{query}" if query else base


def query_name(app: str, stage: str) -> str:
    """The name that tells a stage's streaming query apart under Spark Connect, when its
    session runs several: ``<app>.<stage>`` (``StageTracker(query=...)`` names another).

    Example:
        >>> query_name("wordcount", "split")
        'wordcount.split'
    """
    return f"{app}.{stage}"


def connect_query_id(spark: SparkSession, name: str, app: str, stage: str) -> str | None:
    """The id of the streaming query running this ``foreachBatch`` under Spark Connect;
    None outside any query (a classic session has no query id there either).

    A Connect session has no local properties, so the query is found among the session's
    active queries, which the batch's own query is one of: the one named ``name``, else
    the only one. Its id is kept in the query's checkpoint, as in a classic session, so a
    re-run batch has the same ``txnAppId`` and a query restarted on a fresh checkpoint a
    new one.
    """
    active = spark.streams.active
    if not active:
        return None
    named = [q for q in active if q.name == name]
    if len(named) == 1:
        return str(named[0].id)
    if len(active) == 1 and not named:
        return str(active[0].id)
    raise ValueError(
        f"StageTracker({app!r}, {stage!r}) writes under Spark Connect, where a batch cannot "
        f"tell which of the session's {len(active)} streaming queries it belongs to: name "
        f"the stage's query .queryName({name!r}), or pass StageTracker(writer_id=...) a "
        "name unique to its checkpoint"
    )


def _append(frame: DataFrame, path: str, writer: str | None, batch_id: int | None) -> None:
    # Delta skips the append if this writer already committed this batch id to the table.
    write = frame.write.format("delta").mode("append")
    if writer is not None:
        write = write.option("txnAppId", writer).option("txnVersion", str(batch_id))
    # A retry after a conflict commits once: the lost try committed nothing.
    retry_conflicts(lambda: write.save(path), what=f"append to {path}")
