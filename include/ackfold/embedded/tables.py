"""Ledger tables as DuckDB reads them, and Arrow rows committed back through delta-rs.

Reads: `scan` gives a DuckDB relation over a table (its current version, pruned to some
partitions), or over a list of its data files (`ackfold.embedded.log`). Files on this
machine are read by DuckDB's own parquet reader, the fastest path; files on an object
store through an Arrow dataset that delta-rs's file system opens with the ledger's
storage options, so no DuckDB extension is needed.

Writes go through delta-rs, the ledger's one commit protocol: `append`, and `merge` for
rows that replace others.

Example:
    >>> rel = scan(db, "/srv/warehouse/root_state", columns=["root_id"],   # doctest: +SKIP
    ...            partitions=[("status", "in", ["pending", "timed_out"])])
    >>> rel.count("*").fetchall()                                            # doctest: +SKIP
    [(12,)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ackfold.embedded.log import DataFile

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# A partition filter as delta-rs takes it: (column, "=" | "in" | ..., value(s)).
PartitionFilter = tuple[str, str, Any]


def exists(uri: str, storage_options: Mapping[str, str] | None = None) -> bool:
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(uri, dict(storage_options or {}) or None))


def scan(
    db: duckdb.DuckDBPyConnection,
    uri: str,
    *,
    columns: Sequence[str] | None = None,
    partitions: Sequence[PartitionFilter] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> duckdb.DuckDBPyRelation:
    """The Delta table at `uri` (current version) as a relation, pruned to `partitions`
    (partition values come from the log, never from paths)."""
    from deltalake import DeltaTable

    table = DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    dataset = table.to_pyarrow_dataset(partitions=list(partitions) if partitions else None)
    return _register(db, dataset, columns)


def scan_files(
    db: duckdb.DuckDBPyConnection,
    files: Sequence[DataFile],
    schema: pa.Schema,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> duckdb.DuckDBPyRelation:
    """The rows of `files` (data files of an unpartitioned table) in the columns of
    `schema`; no file: no rows."""
    import pyarrow as pa

    if not files:
        return _register(db, pa.table({f.name: pa.array([], f.type) for f in schema}), None)
    local = [path for f in files if (path := _local_path(f.uri)) is not None]
    if len(local) == len(files):
        return _project(db.read_parquet(local, union_by_name=True), schema.names)
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    base = _common_base([f.uri for f in files])
    handler = DeltaStorageHandler(base, dict(storage_options or {}) or None)
    dataset = ds.dataset(
        [f.uri[len(base) + 1 :] for f in files],
        schema=schema,
        format="parquet",
        filesystem=pafs.PyFileSystem(handler),
    )
    return _register(db, dataset, schema.names)


def append(uri: str, rows: pa.Table, *, storage_options: Mapping[str, str] | None = None) -> None:
    """Append `rows` (cast to the table's schema) in one delta-rs commit; none if empty."""
    if rows.num_rows == 0:
        return
    from deltalake import DeltaTable, write_deltalake

    table = DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    write_deltalake(table, conform(rows, table), mode="append")


def overwrite(
    uri: str, rows: pa.Table, *, storage_options: Mapping[str, str] | None = None
) -> None:
    """Replace every row of the table with `rows`, in one delta-rs commit."""
    from deltalake import DeltaTable, write_deltalake

    table = DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    write_deltalake(table, conform(rows, table), mode="overwrite")


def conform(rows: pa.Table, table: Any) -> pa.Table:
    """`rows` in the table's column order and types (columns it lacks are null)."""
    import pyarrow as pa

    schema = pa.schema(table.schema().to_arrow())
    columns = [
        rows.column(f.name).cast(f.type)
        if f.name in rows.column_names
        else pa.nulls(len(rows), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _register(
    db: duckdb.DuckDBPyConnection, data: Any, columns: Sequence[str] | None
) -> duckdb.DuckDBPyRelation:
    return _project(db.from_arrow(data), columns)


def _project(
    relation: duckdb.DuckDBPyRelation, columns: Sequence[str] | None
) -> duckdb.DuckDBPyRelation:
    return relation.project(*(_quoted(c) for c in columns)) if columns else relation


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _local_path(uri: str) -> str | None:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    return uri if parsed.scheme == "" else None


def _common_base(uris: Sequence[str]) -> str:
    base = uris[0].rsplit("/", 1)[0]
    while not all(u.startswith(base + "/") for u in uris):
        base = base.rsplit("/", 1)[0]
    return base
