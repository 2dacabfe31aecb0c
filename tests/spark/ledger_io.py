"""Write Tracker output into a real Delta ledger, and read root_state back, for Spark tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import SparkSession

from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ACK_EVENTS_DDL,
    ROOT_STATE,
    ROOTS,
    ROOTS_DDL,
    Ledger,
)
from ackfold.ledger.setup.create import create_tables


def append(
    spark: SparkSession, ledger: Ledger, table: str, rows: Iterable[Mapping[str, Any]]
) -> None:
    create_tables(spark, ledger)
    ddl = {ACK_EVENTS: ACK_EVENTS_DDL, ROOTS: ROOTS_DDL}[table]
    lines = [line.strip().rstrip(",") for line in ddl.strip().splitlines()]
    columns = [line.split()[0] for line in lines]
    data = [tuple(row[c] for c in columns) for row in rows]
    schema = ", ".join(line.replace(" NOT NULL", "") for line in lines)
    frame = spark.createDataFrame(data, schema)
    frame.write.format("delta").mode("append").save(ledger.path(table))


def state(spark: SparkSession, ledger: Ledger) -> dict[int, dict[str, Any]]:
    rows = spark.read.format("delta").load(ledger.path(ROOT_STATE)).collect()
    return {row["root_id"]: row.asDict() for row in rows}
