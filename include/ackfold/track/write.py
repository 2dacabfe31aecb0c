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
from ackfold.track.tracker import EVENT_COLUMNS, ROOT_COLUMNS

_CREATED_LEDGERS: set[str] = set()


def append_batch(
    ledger: Ledger,
    batch_id: int | None,
    *,
    app: str,
    stage: str,
    writer_id: str | None,
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
        _txn_app_id(spark, batch_id, app=app, stage=stage, writer_id=writer_id)
        if batch_id is not None
        else None
    )
    _create_ledger(spark, ledger)
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
    spark: SparkSession, batch_id: int, *, app: str, stage: str, writer_id: str | None
) -> str:
    """The ``txnAppId`` of this batch's writes: ``writer_id``, else
    ``ackfold/<app>/<stage>/<streaming query id>`` (see ``StageTracker``)."""
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
    base = f"ackfold/{app}/{stage}"
    return f"{base}/{query}" if query else base


def _create_ledger(spark: SparkSession, ledger: Ledger) -> None:
    # CREATE TABLE IF NOT EXISTS costs a catalog round trip: once per process and ledger.
    if ledger.root not in _CREATED_LEDGERS:
        ledger.create(spark, (ACK_EVENTS, ROOTS))
        _CREATED_LEDGERS.add(ledger.root)


def _append(frame: DataFrame, path: str, writer: str | None, batch_id: int | None) -> None:
    # Delta skips the append if this writer already committed this batch id to the table.
    write = frame.write.format("delta").mode("append")
    if writer is not None:
        write = write.option("txnAppId", writer).option("txnVersion", str(batch_id))
    # A retry after a conflict commits once: the lost try committed nothing.
    retry_conflicts(lambda: write.save(path), what=f"append to {path}")
