"""Rows the driver holds, as Arrow and as a Spark DataFrame read from it.

Classic Spark's ``createDataFrame`` of a Python list re-serializes the rows in a Python
task (`RDD._reserialize`): each call starts a job on Python workers, about 0.2 s on a
2-core machine. An Arrow table is read by the JVM itself, with no Python worker. Spark
Connect sends Arrow either way.

Example:
    >>> from ackfold.spark import get_spark
    >>> local_frame(get_spark(), [(7, "sent")], "root_id BIGINT, status STRING").collect()
    [Row(root_id=7, status='sent')]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


def arrow_table(rows: Iterable[Sequence[Any]], schema: pa.Schema) -> pa.Table:
    """The tuples `rows`, one value per field of `schema` in its order, as an Arrow table:
    built column by column, what both delta-rs and Spark take."""
    import pyarrow as pa

    held = list(rows)
    for row in held:
        if len(row) != len(schema):
            raise ValueError(
                f"a row of {len(row)} values for {len(schema)} columns: {', '.join(schema.names)}"
            )
    columns = [pa.array([row[i] for row in held], type=f.type) for i, f in enumerate(schema)]
    return pa.Table.from_arrays(columns, schema=schema)


def arrow_frame(spark: SparkSession, table: pa.Table) -> DataFrame:
    """The Arrow table `table` as a DataFrame of its schema, nullability kept. The schema is
    passed, not inferred: Spark Connect infers none from a table of no rows."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame(table, schema=from_arrow_schema(table.schema))


def local_frame(
    spark: SparkSession, rows: Iterable[Sequence[Any]], schema: str | pa.Schema
) -> DataFrame:
    """The tuples `rows` as a DataFrame of `schema`: a DDL string (``"a BIGINT, b
    STRING"``), every column nullable, as ``createDataFrame(rows, schema)`` makes it; or an
    Arrow schema, such as a ledger table's from the contract, whose nullability it keeps.
    Datetimes are timezone-aware: a naive one would be read as UTC, where Spark reads it as
    local time."""
    if not isinstance(schema, str):
        return arrow_frame(spark, arrow_table(rows, schema))
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import DataType, StructType

    struct = DataType.fromDDL(schema)
    if not isinstance(struct, StructType):
        raise ValueError(f"not a row schema: {schema!r}")
    return spark.createDataFrame(arrow_table(rows, to_arrow_schema(struct)), schema=struct)
