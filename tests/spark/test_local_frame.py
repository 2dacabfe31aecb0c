"""`local_frame` makes the DataFrame `createDataFrame(rows, ddl)` makes, through Arrow: the
same schema and the same rows, for every type the ledger's tables hold, and no Python
task in its plan (classic Spark runs a list's rows through a Python worker)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import TYPE_CHECKING

import pytest

from ackfold.ledger.schema.tables import REPLAY_LOG, spark_schema
from ackfold.spark.frames import local_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SCHEMA = (
    "root_id BIGINT, n INT, name STRING, done BOOLEAN, day DATE, at TIMESTAMP, ids ARRAY<BIGINT>"
)
PLUS_TWO = timezone(timedelta(hours=2))
ROWS = [
    (7, 1, "sent", True, date(2026, 12, 1), datetime(2026, 12, 1, 10, 0, tzinfo=UTC), [1, 2]),
    (-(2**63), None, None, None, None, None, None),
    # Another offset: the same instant as Spark reads it from the list.
    (9, 3, "é", False, date(2026, 1, 31), datetime(2026, 12, 1, 12, 0, tzinfo=PLUS_TWO), []),
]


def _python_tasks(frame: DataFrame) -> bool:
    return "PythonRDD" in frame._jdf.queryExecution().toRdd().toDebugString()


def test_the_rows_and_schema_are_those_of_create_data_frame(spark: SparkSession) -> None:
    made = local_frame(spark, ROWS, SCHEMA)
    expected = spark.createDataFrame(ROWS, SCHEMA)
    assert made.schema == expected.schema
    assert made.collect() == expected.collect()


def test_no_python_task_reads_the_rows(spark: SparkSession) -> None:
    assert _python_tasks(spark.createDataFrame(ROWS, SCHEMA))  # what it spares
    assert not _python_tasks(local_frame(spark, ROWS, SCHEMA))


def test_no_rows_make_an_empty_frame_of_a_ledger_table(spark: SparkSession) -> None:
    empty = local_frame(spark, [], spark_schema(REPLAY_LOG))
    assert empty.schema == spark.createDataFrame([], spark_schema(REPLAY_LOG)).schema
    assert empty.count() == 0


@pytest.mark.parametrize(
    ("rows", "schema", "message"),
    [
        ([(1, "a")], "root_id BIGINT", "a row of 2 values for 1 columns"),
        ([(1,)], "BIGINT", "not a row schema"),
    ],
)
def test_rows_that_do_not_fit_are_refused(
    spark: SparkSession, rows: list[tuple[object, ...]], schema: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        local_frame(spark, rows, schema)


def test_an_arrow_schema_keeps_its_fields_nullability(spark: SparkSession) -> None:
    import pyarrow as pa

    schema = pa.schema([pa.field("root_id", pa.int64(), nullable=False), ("status", pa.string())])
    frame = local_frame(spark, [(7, "sent"), (8, None)], schema)
    assert [(f.name, f.nullable) for f in frame.schema] == [("root_id", False), ("status", True)]
    assert [tuple(r) for r in frame.collect()] == [(7, "sent"), (8, None)]
    assert not _python_tasks(frame)
