"""What a producer sent: rows of `sent_messages`, which the quality checks hold the ledger
to (every message sent is registered as a root, or it was lost before it got there).

Any producer that learns its messages' ids on sending may record them: SQS returns each
`MessageId`, the id the app's spout registers. The demo's feed does.

Example:
    >>> record_sent(spark, ledger, app="wordcount", source="sqs",
    ...             source_queue="wordcount-sentences", message_ids=ids)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ackfold.ledger.commits.driver_writers import driver_writer
from ackfold.ledger.schema.contract import arrow_schema
from ackfold.ledger.schema.tables import SENT_MESSAGES, Ledger
from ackfold.ledger.setup.create import create_tables
from ackfold.ledger.storage.conflicts import retry_conflicts
from ackfold.ledger.storage.protocol import refuse_spark_commit
from ackfold.spark.frames import arrow_frame, arrow_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def record_sent(
    spark: SparkSession,
    ledger: Ledger,
    *,
    app: str,
    source: str,
    source_queue: str,
    message_ids: Sequence[str],
    sent_at: datetime | None = None,
) -> None:
    """Append one `sent_messages` row per message id, in one commit."""
    if not message_ids:
        return
    # Timezone-aware: Spark reads a naive datetime in the driver's local time zone.
    at = (sent_at or datetime.now(UTC)).astimezone(UTC)
    rows = [(app, source, source_queue, message_id, at) for message_id in message_ids]
    table = arrow_table(rows, arrow_schema(SENT_MESSAGES))
    direct = driver_writer(spark, ledger)
    if direct is not None:  # delta-rs: the only protocol on an object store
        direct.append_arrow(SENT_MESSAGES, table)
        return
    refuse_spark_commit(ledger.root, SENT_MESSAGES)
    frame = arrow_frame(spark, table)
    create_tables(spark, ledger, (SENT_MESSAGES,))
    path = ledger.path(SENT_MESSAGES)
    retry_conflicts(
        lambda: frame.write.format("delta").mode("append").save(path), what=f"append to {path}"
    )
