"""Rows the driver holds, as a Spark DataFrame, through Arrow.

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
    from pyspark.sql import DataFrame, SparkSession


def local_frame(spark: SparkSession, rows: Iterable[Sequence[Any]], schema: str) -> DataFrame:
    """The tuples `rows` as a DataFrame of the DDL `schema` (``"a BIGINT, b STRING"``),
    every column nullable, as ``createDataFrame(rows, schema)`` makes it. Datetimes are
    timezone-aware: a naive one would be read as UTC, where Spark reads it as local time."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import DataType, StructType

    struct = DataType.fromDDL(schema)
    if not isinstance(struct, StructType):
        raise ValueError(f"not a row schema: {schema!r}")
    arrow = to_arrow_schema(struct)
    held = list(rows)
    for row in held:
        if len(row) != len(arrow):
            raise ValueError(f"a row of {len(row)} values for {len(arrow)} columns: {schema}")
    columns = [pa.array([row[i] for row in held], type=field.type) for i, field in enumerate(arrow)]
    return spark.createDataFrame(pa.Table.from_arrays(columns, schema=arrow), schema=struct)
