"""Through Spark Connect, `local_frame` makes a ledger table's frame of no rows (Connect
infers no schema from an empty Arrow table, so the schema is passed) and of rows, with the
contract's types and nullability."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ackfold.ledger.schema.contract import arrow_schema
from ackfold.ledger.schema.tables import ACK_EVENTS, SENT_MESSAGES
from ackfold.spark.connect import is_connect
from ackfold.spark.frames import arrow_frame, arrow_table, local_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_no_rows_make_an_empty_frame_of_the_contracts_schema(spark: SparkSession) -> None:
    assert is_connect(spark)
    empty = local_frame(spark, [], arrow_schema(ACK_EVENTS))
    assert empty.columns == arrow_schema(ACK_EVENTS).names
    assert empty.count() == 0


def test_rows_keep_the_contracts_types_and_nullability(spark: SparkSession) -> None:
    at = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
    table = arrow_table([("wordcount", "sqs", "q", "m-1", at)], arrow_schema(SENT_MESSAGES))
    frame = arrow_frame(spark, table)
    fields = {f.name: f.nullable for f in frame.schema}
    assert fields == {f.name: f.nullable for f in arrow_schema(SENT_MESSAGES)}
    assert frame.toArrow().to_pylist() == table.to_pylist()  # the same instant
