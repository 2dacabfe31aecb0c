"""Which data files of a Delta table carry a deletion vector, read from its log per file,
and an Arrow dataset of a table whose files hold its rows as they are.

delta-rs's add actions (`get_add_actions`, flattened or not) carry no deletion vectors,
and `DeltaTable.deletion_vectors()` (deltalake 1.6 on) reads every vector's bitmap: so
the table's last checkpoint, then the commits after it, are replayed here, per file.
delta-rs's own Arrow dataset refuses any table that lists the `deletionVectors` feature,
with or without vectors; `plain_dataset` gives one for such a table once no file has a
vector (`require_plain_files`).

Example:
    >>> files_with_deletion_vectors(DeltaTable("/srv/warehouse/ack_events"))  # doctest: +SKIP
    ['part-00000-0a14...-c000.snappy.parquet']
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import unquote

from ackfold.ledger.errors import UnreadableFiles
from ackfold.ledger.storage.add_actions import add_actions
from ackfold.ledger.storage.store import file_system


def require_plain_files(table: Any, path: str) -> None:
    """Raise `UnreadableFiles` unless the data files of `table` (a delta-rs `DeltaTable`
    at `path`) hold exactly its rows, under its column names: no column mapping, and no
    deletion vector on any file of its current version. A table that lists the
    `deletionVectors` feature but whose files have none (a table whose vectors were
    purged, or that never deleted a row) reads as any other. The log is read for them:
    the add actions delta-rs flattens carry no deletion vectors."""
    mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    if mode != "none":
        raise UnreadableFiles(
            f"{path} has column mapping (delta.columnMapping.mode = {mode}): its data files "
            "name the columns otherwise, and ackfold's engines read the files themselves. "
            "Rewrite it without (CREATE TABLE ... AS SELECT into a table made by "
            "`ackfold init`, then swap the directories), and keep the table property "
            "delta.columnMapping.mode unset on ledger tables"
        )
    features = table.protocol().reader_features or []
    if "deletionVectors" not in features:
        return
    vectors = files_with_deletion_vectors(table)
    if vectors:
        raise UnreadableFiles(
            f"{path} has deletion vectors on {len(vectors)} data file(s) (e.g. "
            f"{vectors[0]}): rows deleted beside the files, which ackfold's engines read "
            "themselves. Rewrite those files without them, in Spark: ALTER TABLE "
            f"delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false') "
            f"(no new ones), then REORG TABLE delta.`{path}` APPLY (PURGE). The table keeps "
            "the deletionVectors feature in its protocol; ackfold reads it once no file has "
            "a vector"
        )


def plain_dataset(
    table: Any, path: str, keep: Callable[[Mapping[str, Any]], bool] | None = None
) -> Any:
    """The rows of `table` (a delta-rs `DeltaTable` at `path`) as a `pyarrow.dataset`
    over its data files, partition values from its log; `UnreadableFiles` where its files
    do not hold its rows (`require_plain_files`). With `keep`, over only the files whose
    add action, as delta-rs flattens it (`path`, `partition.<column>`, `min.<column>`,
    `max.<column>`), it accepts: files pruned by their statistics, none opened."""
    require_plain_files(table, path)
    if keep is None and "deletionVectors" not in (table.protocol().reader_features or []):
        return table.to_pyarrow_dataset()
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    schema = pa.schema(table.schema().to_arrow())
    actions = add_actions(table)
    if keep is not None:
        actions = actions.filter(pa.array([keep(a) for a in actions.to_pylist()], pa.bool_()))
    partitions = list(table.metadata().partition_columns)
    expressions = []
    for row in actions.select(["path", *(f"partition.{c}" for c in partitions)]).to_pylist():
        expression = ds.scalar(True)
        for column in partitions:
            value = row[f"partition.{column}"]
            field = ds.field(column)
            expression &= (
                field.is_null()
                if value is None
                else field == pa.scalar(value, schema.field(column).type)
            )
        expressions.append(expression)
    store = pafs.PyFileSystem(file_system(table.table_uri, table._storage_options))
    return ds.FileSystemDataset.from_paths(
        actions.column("path").to_pylist(),
        schema=schema,
        format=ds.ParquetFileFormat(),
        filesystem=store,
        partitions=expressions,
    )


def files_with_deletion_vectors(table: Any) -> list[str]:
    """The data files (paths as the log names them, decoded) of the current version of
    `table` (a delta-rs `DeltaTable`) whose add action carries a deletion vector: the
    table's last checkpoint, then the commits after it, replayed per file.

    Read from the log because delta-rs's add actions (`get_add_actions`, flattened or
    not) carry no deletion vectors, and `DeltaTable.deletion_vectors()` (deltalake 1.6
    on) reads every vector's bitmap, not only whether it is there."""
    import pyarrow.fs as pafs

    store = pafs.PyFileSystem(file_system(table.table_uri, table._storage_options))
    version = int(table.version())
    start, vectors = _checkpoint_vectors(store, version)
    for v in range(start + 1, version + 1):
        try:
            with store.open_input_stream(f"_delta_log/{v:020d}.json") as handle:
                text = handle.read().decode("utf-8")
        except (FileNotFoundError, OSError) as exc:
            raise UnreadableFiles(
                f"{table.table_uri}: cannot tell which files have deletion vectors, commit "
                f"{v} of its log is gone ({exc}) and no checkpoint covers it"
            ) from None
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        # A commit may remove a file and add it back with a vector (a DELETE): removes
        # first, then adds, so that the file's last add is what stays.
        for action in actions:
            if "remove" in action:
                vectors.pop(unquote(action["remove"]["path"]), None)
        for action in actions:
            if "add" in action:
                add = action["add"]
                vectors[unquote(add["path"])] = add.get("deletionVector") is not None
    return sorted(path for path, has in vectors.items() if has)


def _checkpoint_vectors(store: Any, version: int) -> tuple[int, dict[str, bool]]:
    """The newest complete checkpoint of the log at or before `version` (-1 if none),
    and, for each file it adds, whether the file has a deletion vector."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    parts: dict[int, list[str]] = {}
    for info in store.get_file_info(pafs.FileSelector("_delta_log", allow_not_found=True)):
        match = _CHECKPOINT.fullmatch(info.base_name)
        if match and int(match["version"]) <= version:
            parts.setdefault(int(match["version"]), []).append(info.path)
    for found in sorted(parts, reverse=True):
        names = sorted(parts[found])
        wanted = _CHECKPOINT.fullmatch(names[0].rsplit("/", 1)[-1])
        assert wanted is not None
        if wanted["parts"] and len(names) != int(wanted["parts"]):
            continue  # a multi-part checkpoint still being written
        vectors: dict[str, bool] = {}
        for name in names:
            with store.open_input_file(name) as handle:
                adds = pq.read_table(handle, columns=["add"]).column("add")
            for add in adds.to_pylist():
                if add is not None:
                    vectors[unquote(add["path"])] = add.get("deletionVector") is not None
        return found, vectors
    return -1, {}


# A classic checkpoint (`<v>.checkpoint.parquet`) or one part of a multi-part one
# (`<v>.checkpoint.<part>.<parts>.parquet`); a V2 checkpoint is of a protocol that
# delta-rs does not read.
_CHECKPOINT: Final = re.compile(
    r"(?P<version>\d{20})\.checkpoint(?:\.(?P<part>\d{10})\.(?P<parts>\d{10}))?\.parquet"
)
