"""What a ledger table takes, for the JVM-free writer (`ackfold.ledger.commits.writer`): a
stored table checked against the contract, rows built or conformed to a table's schema,
and delta-rs's errors said in one line naming the table."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ackfold.ledger.errors import LedgerError, SchemaMismatch
from ackfold.ledger.reading.sql import first_line
from ackfold.ledger.schema.contract import delta_schema
from ackfold.ledger.schema.optional_columns import require_roots_fit
from ackfold.ledger.schema.tables import ADDED_COLUMNS, FORMER_COLUMNS, ROOTS


def check_table(name: str, path: str, table: Any) -> None:
    """Raise `SchemaMismatch` unless `table` (ledger table `name`, at `path`) takes the
    contract's rows of `name`: every column of the contract but the optional ones added
    since, of its type, nullable where the contract allows nulls; no NOT NULL column
    outside it but an earlier layout's (the reconcile rewrites those)."""
    actual = {f["name"]: f for f in json.loads(table.schema().to_json())["fields"]}
    optional = ADDED_COLUMNS.get(name, ())
    for want in delta_schema(name)["fields"]:
        have = actual.pop(want["name"], None)
        if have is None and want["name"] in optional:
            continue  # added after the table was made: its rows are written without
        if have is None:
            raise SchemaMismatch(f"{path} has no column {want['name']!r} (contract v1)")
        if have["type"] != want["type"]:
            raise SchemaMismatch(
                f"{path}: column {want['name']!r} is {json.dumps(have['type'])}, the "
                f"contract says {json.dumps(want['type'])}"
            )
        if want["nullable"] and not have["nullable"]:
            raise SchemaMismatch(
                f"{path}: column {want['name']!r} is NOT NULL, the contract allows nulls"
            )
    former = FORMER_COLUMNS.get(name, ())
    for extra in actual.values():
        # An earlier ackfold's root_state: the reconcile rewrites it before its first
        # write (`ackfold.ledger.setup.layout.upgrade_root_state`); until then it is only read.
        if not extra["nullable"] and extra["name"] not in former:
            raise SchemaMismatch(
                f"{path}: column {extra['name']!r} is NOT NULL and not in the contract: "
                "the writer cannot fill it"
            )


def arrow_rows(name: str, rows: Sequence[Mapping[str, Any]], schema: Any, roots_path: str) -> Any:
    """The row mappings `rows` of ledger table `name` as an Arrow table of `schema` (the
    table's as stored): columns outside the contract (added to the table later) stay null.
    Roots whose id scheme the `roots` table at `roots_path` cannot record are refused."""
    import pyarrow as pa

    if name == ROOTS:
        recorded = [row.get("id_scheme") for row in rows]
        require_roots_fit(roots_path, schema.names, recorded)
    columns = {field.name: [row.get(field.name) for row in rows] for field in schema}
    return pa.table(columns, schema=schema)


def conform(data: Any, schema: Any) -> Any:
    """The Arrow table `data` in the columns and types of `schema` (a ``pyarrow.Schema``):
    columns the table gained that `data` lacks are null, as in `append`'s rows.

    Example:
        >>> import pyarrow as pa
        >>> schema = pa.schema([("root_id", pa.int64()), ("note", pa.string())])
        >>> conform(pa.table({"root_id": pa.array([7], pa.int32())}), schema).to_pylist()
        [{'root_id': 7, 'note': None}]
    """
    import pyarrow as pa

    columns = [
        data.column(field.name).cast(field.type)
        if field.name in data.column_names
        else pa.nulls(data.num_rows, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


@contextmanager
def writing(path: str) -> Iterator[None]:
    """Turn delta-rs and file system errors into one `LedgerError` line naming the table."""
    from deltalake.exceptions import DeltaError

    try:
        yield
    except (DeltaError, OSError) as exc:
        raise LedgerError(f"cannot write {path}: {first_line(exc)}") from exc
