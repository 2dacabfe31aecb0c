"""Delta's MERGE and DELETE as SQL, the same in a classic session and through Spark Connect.

`delta.tables.DeltaTable` reaches a Connect server only through Delta Connect's server
plugin, which is not published for Spark 4.1 (`delta-connect-server_4.1_2.13` is not on
Maven Central), while Delta's SQL runs wherever Delta does. So every MERGE and DELETE of
ackfold is a statement over `delta.`path``, its source a temporary view of the DataFrame.

Statements are built from ackfold's own column names and from values that `literal`
renders (dates, times, numbers, and strings quoted with their quotes escaped); no text a
user typed reaches them.

Example:
    >>> literal(date(2026, 11, 26)), literal("it's"), literal(7)
    ("DATE '2026-11-26'", "'it\\\\'s'", '7')
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameWriter, Row, SparkSession


def table(path: str) -> str:
    """The SQL name of the Delta table at `path`."""
    return "delta.`" + path.replace("`", "``") + "`"


def literal(value: date | datetime | int | float | str | bool) -> str:
    """`value` as a SQL literal (a datetime in UTC, whatever its zone)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, datetime):
        at = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
        return f"TIMESTAMP '{at.strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def in_list(column: str, values: Iterable[date | datetime | int | float | str]) -> str:
    """`column IN (...)` over `values` (at least one)."""
    rendered = [literal(v) for v in values]
    if not rendered:
        raise ValueError(f"{column} IN (): no values")
    return f"{column} IN ({', '.join(rendered)})"


def assignments(columns: Sequence[str], source: str = "s") -> str:
    """`c = s.c, ...` for an UPDATE SET or an INSERT's VALUES."""
    return ", ".join(f"{c} = {source}.{c}" for c in columns)


@contextmanager
def view_of(frame: DataFrame) -> Iterator[str]:
    """A temporary view of `frame`, named uniquely, dropped on exit."""
    name = f"ackfold_source_{uuid.uuid4().hex}"
    frame.createOrReplaceTempView(name)
    try:
        yield name
    finally:
        frame.sparkSession.catalog.dropTempView(name)


@contextmanager
def idempotent(spark: SparkSession, txn: tuple[str, int] | None) -> Iterator[None]:
    """Delta's idempotent-DML session settings around one statement: a statement already
    committed under this (app id, version) is skipped."""
    if txn is None:
        yield
        return
    spark.conf.set("spark.databricks.delta.write.txnAppId", txn[0])
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(txn[1]))
    try:
        yield
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")


def with_txn(writer: DataFrameWriter, txn: tuple[str, int] | None) -> DataFrameWriter:
    """`writer` committing with Delta's transaction `txn` (app id, version): its
    `txnAppId`/`txnVersion` options, which make a write that app id already made at that
    version (or later) a no-op (`ackfold.ledger.commits.fence`)."""
    if txn is None:
        return writer
    return writer.option("txnAppId", txn[0]).option("txnVersion", str(txn[1]))


def merge(
    path: str,
    source: DataFrame,
    *,
    on: str,
    clauses: Sequence[str],
    txn: tuple[str, int] | None = None,
) -> Row | None:
    """`MERGE INTO` the table at `path` (alias `t`) `USING` `source` (alias `s`) `ON` `on`,
    with the `WHEN ...` `clauses`; the statement's metrics row (`num_affected_rows`,
    `num_inserted_rows`, ...).

    It runs in `source`'s session, where its view is: inside `foreachBatch` that is the
    batch's, which a classic streaming query clones from the one that started it."""
    spark = source.sparkSession
    with view_of(source) as view, idempotent(spark, txn):
        statement = f"MERGE INTO {table(path)} AS t USING {view} AS s ON {on} " + " ".join(clauses)
        return spark.sql(statement).first()


def delete(spark: SparkSession, path: str, where: str) -> None:
    """`DELETE FROM` the table at `path` the rows `where` holds."""
    # `where` is built by ackfold from `literal`s, never from a user's text.
    spark.sql(f"DELETE FROM {table(path)} WHERE {where}").collect()  # noqa: S608


def metric(row: Row | None, name: str) -> int:
    """One of a MERGE's metrics, 0 if it has none."""
    values: dict[str, Any] = row.asDict() if row is not None else {}
    return int(values.get(name) or 0)
