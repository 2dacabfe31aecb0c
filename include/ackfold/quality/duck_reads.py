"""How the embedded engine's quality checks read a ledger table into DuckDB
(`ackfold.quality.duck_batches`): its current version, only one app's rows when the run
is for one app, and its columns with the Spark type names the schema checks observe
(`spark_type`), as the Spark engine's batches have them.

An unpartitioned local table is read by DuckDB's parquet reader (row groups skipped by
their statistics), the others through delta-rs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ackfold.embedded import tables
from ackfold.embedded.log import appended_since

if TYPE_CHECKING:
    import duckdb


def read(
    db: duckdb.DuckDBPyConnection,
    uri: str,
    columns: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    *,
    app: str | None = None,
    keep: Callable[[Mapping[str, str | None]], bool] | None = None,
) -> tuple[duckdb.DuckDBPyRelation, dict[str, str]]:
    """The ledger table at `uri` as a relation of `db` (`columns`, all if None, less
    `exclude`; only `app`'s rows if given; of a partitioned table, only the files whose
    partition values `keep` accepts, as `tables.scan` reads them), and its schema: each
    column's Spark type."""
    import duckdb

    from ackfold.ledger.storage.snapshots import run_table

    # Within a run, the table its writer keeps, refreshed: no second open, and the run's
    # storage options on an object store.
    table = run_table(uri)
    schema = {f["name"]: spark_type(f["type"]) for f in _fields(table.schema().to_json())}
    wanted = [c for c in (columns or schema) if c in schema and c not in exclude]
    if app is not None and "app" in schema and "app" not in wanted:
        wanted.append("app")  # what the filter below reads
    if not table.metadata().partition_columns:
        files = appended_since(uri, None).files
        relation = tables.scan_files(db, files, _arrow_schema(table, wanted))
    else:
        relation = tables.scan(db, uri, columns=wanted, keep=keep)
    if app is not None and "app" in schema:
        relation = relation.filter(duckdb.ColumnExpression("app") == duckdb.ConstantExpression(app))
    return relation, schema


def spark_type(delta_type: Any) -> str:
    """The Spark type name of a Delta column type (what Spark's schema checks observe)."""
    if isinstance(delta_type, str):
        simple = {
            "string": "StringType", "long": "LongType", "integer": "IntegerType",
            "short": "ShortType", "byte": "ByteType", "boolean": "BooleanType",
            "timestamp": "TimestampType", "timestamp_ntz": "TimestampNTZType",
            "date": "DateType", "binary": "BinaryType", "double": "DoubleType",
            "float": "FloatType",
        }  # fmt: skip
        return simple.get(delta_type, "DecimalType" if delta_type.startswith("decimal") else "?")
    kind = delta_type.get("type") if isinstance(delta_type, dict) else None
    return {"array": "ArrayType", "map": "MapType", "struct": "StructType"}.get(str(kind), "?")


def _fields(schema_json: str) -> list[dict[str, Any]]:
    import json

    fields: list[dict[str, Any]] = json.loads(schema_json)["fields"]
    return fields


def _arrow_schema(table: Any, columns: Sequence[str]) -> Any:
    import pyarrow as pa

    schema = pa.schema(table.schema().to_arrow())
    return pa.schema([schema.field(c) for c in columns])
