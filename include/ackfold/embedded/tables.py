"""Ledger tables as DuckDB reads them, and Arrow rows committed back through delta-rs.

Reads: `scan` gives a DuckDB relation over a table (its current version, pruned to some
partitions), or over a list of its data files (`ackfold.embedded.log`). Files on this
machine are read by DuckDB's own parquet reader, the fastest path; files on an object
store through an Arrow dataset that delta-rs's file system opens with the ledger's
storage options, so no DuckDB extension is needed: read into Arrow first, then scanned
(`_read_remote`). In a run the table is the run's kept snapshot of it, refreshed to its
latest version (`ackfold.ledger.storage.snapshots.run_table`), not opened again per scan.

Writes are not here: they go through `ackfold.ledger.commits.writer.LedgerWriter` (delta-rs, the
ledger's one commit protocol, with its conflict retries and checkpoints).

Example:
    >>> rel = scan(db, "/srv/warehouse/root_state", columns=["root_id"],   # doctest: +SKIP
    ...            partitions=[("status", "in", ["pending", "timed_out"])])
    >>> rel.count("*").fetchall()                                            # doctest: +SKIP
    [(12,)]
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from ackfold.embedded.log import DataFile, absolute_uri
from ackfold.ledger.storage.add_actions import add_actions
from ackfold.ledger.storage.store import file_system

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

_names = itertools.count()
# A partition filter as delta-rs takes it: (column, "=" | "!=" | "in" | "not in", value(s)).
PartitionFilter = tuple[str, str, Any]


def exists(uri: str, storage_options: Mapping[str, str] | None = None) -> bool:
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(uri, dict(storage_options or {}) or None))


def scan(
    db: duckdb.DuckDBPyConnection,
    uri: str,
    *,
    columns: Sequence[str] | None = None,
    keep: Callable[[Mapping[str, str | None]], bool] | None = None,
    partitions: Sequence[PartitionFilter] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> duckdb.DuckDBPyRelation:
    """The Delta table at `uri` (current version) as a relation, read only from the
    files whose partition values `keep` accepts (values as the log writes them: strings,
    None for null) and that match every filter of `partitions` (delta-rs's form:
    `(column, "=" | "!=" | "in" | "not in", value or values)`). Partition values come
    from the log, never from paths. A table whose files do not hold its rows as they are
    (deletion vectors, column mapping) is refused (`require_plain_files`)."""
    from ackfold.ledger.storage.snapshots import run_table
    from ackfold.ledger.storage.vectors import require_plain_files

    if partitions:
        keep = _and(keep, partitions)
    # In a run, the run's kept snapshot of the table, refreshed: no open per scan.
    table = run_table(uri, storage_options)
    schema = arrow_table_schema(table)
    columns_of = list(table.metadata().partition_columns)
    actions = add_actions(table)
    require_plain_files(table, uri)
    wanted = ["path", *(f"partition.{c}" for c in columns_of)]
    base = table.table_uri.rstrip("/")
    files: list[tuple[str, dict[str, str | None]]] = []
    for row in actions.select(wanted).to_pylist():
        values = {c: _text(row[f"partition.{c}"]) for c in columns_of}
        if keep is None or keep(values):
            files.append((absolute_uri(base, row["path"]), values))
    # Only the columns asked for are read from the files.
    data = [f for f in schema if f.name not in columns_of and (not columns or f.name in columns)]
    typed = {f.name: f.type for f in schema}
    if not files:
        rel = _register(db, _empty(schema), None)
    elif all(_local_path(uri) is not None for uri, _ in files):
        rel = _local_partitioned(db, files, data, columns_of, typed)
    else:
        rel = _remote_partitioned(db, files, data, columns_of, typed, storage_options)
    wanted_columns = list(columns or schema.names)
    optional = _added_columns(uri)
    # A column the table's schema lacks (a contract-v1 table) but ackfold asks for
    # is one added after v1: read as null, as in a file written before it.
    for name in wanted_columns:
        if name not in typed and name in optional:
            typed[name] = optional[name]
    return _project(rel, wanted_columns, typed)


def _and(
    keep: Callable[[Mapping[str, str | None]], bool] | None,
    filters: Sequence[PartitionFilter],
) -> Callable[[Mapping[str, str | None]], bool]:
    def matches(values: Mapping[str, str | None]) -> bool:
        for column, op, wanted in filters:
            value = values.get(column)
            choices = {str(w) for w in wanted} if op in ("in", "not in") else {str(wanted)}
            if (value in choices) != (op in ("=", "in")):
                return False
        return keep is None or keep(values)

    return matches


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _local_partitioned(
    db: duckdb.DuckDBPyConnection,
    files: Sequence[tuple[str, Mapping[str, str | None]]],
    data: Sequence[Any],
    partitions: Sequence[str],
    typed: Mapping[str, Any],
) -> duckdb.DuckDBPyRelation:
    """One scan of every file by DuckDB's parquet reader, each row joined to its file's
    partition values."""
    paths = [str(_local_path(uri)) for uri, _ in files]
    rel = _project(db.read_parquet(paths, union_by_name=True), [f.name for f in data], typed)
    if not partitions:
        return rel
    name = f"_ackfold_files_{next(_names)}"
    # Built from ackfold's own names only; the values go in as parameters.
    declared = ", ".join(f"{_quoted(c)} VARCHAR" for c in partitions)
    db.execute(f"CREATE TEMP TABLE {name} (filename VARCHAR, {declared})")
    markers = ", ".join("?" for _ in range(len(partitions) + 1))
    rows = [[path, *(v[c] for c in partitions)] for path, (_, v) in zip(paths, files, strict=True)]
    db.executemany(f"INSERT INTO {name} VALUES ({markers})", rows)  # noqa: S608
    found = _project(
        db.read_parquet(paths, union_by_name=True, filename=True),
        [*(f.name for f in data), "filename"],
        typed,
    )
    found.create_view(f"{name}_rows")
    cols = [f"p.{_quoted(f.name)}" for f in data] + [
        f"CAST(f.{_quoted(c)} AS {_duck_type(typed[c])}) AS {_quoted(c)}" for c in partitions
    ]
    return db.sql(
        f"SELECT {', '.join(cols)} FROM {name}_rows p JOIN {name} f USING (filename)"  # noqa: S608
    )


def _remote_partitioned(
    db: duckdb.DuckDBPyConnection,
    files: Sequence[tuple[str, Mapping[str, str | None]]],
    data: Sequence[Any],
    partitions: Sequence[str],
    typed: Mapping[str, Any],
    storage_options: Mapping[str, str] | None,
) -> duckdb.DuckDBPyRelation:
    """The files of each partition read through delta-rs's file system (an object
    store), that partition's values added as columns, all in one Arrow table: one
    relation, not a union of one per partition, which DuckDB binds again at each union
    (a tenth of an S3 soak's time in its third month)."""
    import pyarrow as pa

    groups: dict[tuple[str | None, ...], list[str]] = {}
    for uri, values in files:
        groups.setdefault(tuple(values[c] for c in partitions), []).append(uri)
    parts = []
    for group, uris in groups.items():
        rows = _read_remote(_dataset_of(db, uris, pa.schema(data), storage_options))
        for column, value in zip(partitions, group, strict=True):
            kind = typed[column]
            constant = pa.array([_partition_value(value, kind)] * rows.num_rows, type=kind)
            rows = rows.append_column(pa.field(column, kind), constant)
        parts.append(rows)
    return _register(db, pa.concat_tables(parts), [*(f.name for f in data), *partitions])


def _partition_value(value: str | None, kind: Any) -> Any:
    """A partition value as the log writes it (text), as a value of Arrow type `kind`.

    Example:
        >>> import pyarrow as pa
        >>> _partition_value("2027-01-08", pa.date32()), _partition_value(None, pa.string())
        (datetime.date(2027, 1, 8), None)
    """
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_date(kind):
        return date.fromisoformat(value)
    if pa.types.is_integer(kind):
        return int(value)
    if pa.types.is_boolean(kind):
        return value.lower() == "true"
    return value


def _duck_type(arrow_type: Any) -> str:
    import pyarrow as pa

    if pa.types.is_date(arrow_type):
        return "DATE"
    if pa.types.is_int32(arrow_type):
        return "INTEGER"
    if pa.types.is_integer(arrow_type):
        return "BIGINT"
    if pa.types.is_boolean(arrow_type):
        return "BOOLEAN"
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMPTZ"
    return "VARCHAR"


def arrow_table_schema(table: Any) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(table.schema().to_arrow())


def _empty(schema: pa.Schema) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_batches([], schema=schema)  # `empty_table()` would import pandas


def scan_files(
    db: duckdb.DuckDBPyConnection,
    files: Sequence[DataFile],
    schema: pa.Schema,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> duckdb.DuckDBPyRelation:
    """The rows of `files` (data files of an unpartitioned table) in the columns of
    `schema`; no file: no rows."""

    if not files:
        return _register(db, _empty(schema), None)
    local = [path for f in files if (path := _local_path(f.uri)) is not None]
    if len(local) == len(files):
        typed = {f.name: f.type for f in schema}
        return _project(db.read_parquet(local, union_by_name=True), schema.names, typed)
    rows = _read_remote(_dataset_of(db, [f.uri for f in files], schema, storage_options))
    return _register(db, rows, schema.names)


def _dataset_of(
    db: duckdb.DuckDBPyConnection,
    uris: Sequence[str],
    schema: pa.Schema,
    storage_options: Mapping[str, str] | None,
) -> Any:
    """An Arrow dataset of parquet files on an object store, read through delta-rs's
    file system with the ledger's storage options.

    Its strings are declared `string_view`: delta-rs's MERGE writes some files with
    their strings as views, others not, and Arrow compares the filters DuckDB pushes
    down (`app = $app`) only with the fragment's own type; a `string_view` filter is
    cast to a plain string fragment's, not the other way round. (An Arrow that cannot
    cast to `string_view` reads neither kind as views: plain strings it is.)"""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    # One file system per container, kept: not one per partition read.
    container = urlparse(uris[0])
    base = f"{container.scheme}://{container.netloc}"
    if not all(u.startswith(base + "/") for u in uris):
        base = _common_base(uris)
    handler = file_system(base, storage_options)
    if _casts_to_string_view():
        schema = pa.schema(
            [f.with_type(pa.string_view()) if pa.types.is_string(f.type) else f for f in schema]
        )
    return ds.dataset(
        [u[len(base) + 1 :] for u in uris],
        schema=schema,
        format="parquet",
        filesystem=pafs.PyFileSystem(handler),
    )


def _read_remote(dataset: Any) -> pa.Table:
    """The rows of an object store's files, read here, not by DuckDB. DuckDB scans an
    Arrow dataset through `Scanner.to_reader()`, which holds the GIL while Arrow's I/O
    threads call delta-rs's file system, a Python one that needs it: the two wait for
    each other for good (a reconcile on the S3 API hung so in the soak). `to_table`
    lets go of the GIL while it reads. The files are the partitions or new files a run
    reads, not the table."""
    return dataset.to_table()


@functools.cache
def _casts_to_string_view() -> bool:
    """Whether this Arrow casts strings to `string_view` (18 and later)."""
    import pyarrow as pa

    try:
        pa.array([""]).cast(pa.string_view())
    except NotImplementedError:
        return False
    return True


def _register(
    db: duckdb.DuckDBPyConnection, data: Any, columns: Sequence[str] | None
) -> duckdb.DuckDBPyRelation:
    return _project(db.from_arrow(data), columns)


def _project(
    relation: duckdb.DuckDBPyRelation,
    columns: Sequence[str] | None,
    typed: Mapping[str, Any] | None = None,
) -> duckdb.DuckDBPyRelation:
    """`columns` of `relation`; one it lacks, of Arrow type `typed[name]`, is null: a
    nullable column added to the table after some of its files were written (DuckDB's
    `union_by_name` fills it only where at least one of the files read has it)."""
    if not columns:
        return relation
    have = set(relation.columns)
    if all(c in have or typed is None or c not in typed for c in columns):
        return relation.project(*(_quoted(c) for c in columns))
    return relation.project(
        ", ".join(
            _quoted(c)
            if c in have or typed is None or c not in typed
            else f"CAST(NULL AS {_duck_type(typed[c])}) AS {_quoted(c)}"
            for c in columns
        )
    )


def _added_columns(uri: str) -> dict[str, Any]:
    """The Arrow types of the columns ackfold added after contract v1 to the ledger table
    at `uri` (by its last path segment; none for any other table): what a table made
    before them may lack, and reads as null."""
    from ackfold.ledger.schema.contract import arrow_schema
    from ackfold.ledger.schema.tables import ADDED_COLUMNS

    name = uri.rstrip("/").rsplit("/", 1)[-1]
    added = ADDED_COLUMNS.get(name, ())
    if not added:
        return {}
    return {f.name: f.type for f in arrow_schema(name) if f.name in added}


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
