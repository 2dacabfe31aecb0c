"""The contract tables' optional columns: what a stored table lacks, what that means for the
rows written to it, and `upgrade`, the one command that adds them (`ackfold upgrade`).

A column ackfold added to `roots` or `ack_events` after contract v1
(`tables.ADDED_COLUMNS`) is optional for every producer, forever: no ackfold command adds
it as a side effect, since a schema change stops the Delta streams that read the table and
makes a plain append that lacks the column fail. So ackfold writes into an older table in
its own layout: a `roots` table without `id_scheme` holds roots of the text scheme (a null
`id_scheme`, `ledger.schemes`), and a tracker registering into it derives their ids so
(`roots_scheme`); a root of another scheme cannot be recorded there, and is refused before
anything is written (`require_roots_fit`).

Example:
    >>> import tempfile
    >>> from ackfold.ledger.writer import LedgerWriter
    >>> writer = LedgerWriter(tempfile.mkdtemp())
    >>> _ = writer.create(["roots", "ack_events"])  # made by this release: every column
    >>> upgrade(writer)
    []
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

from ackfold.ledger import schemes
from ackfold.ledger.contract import CONTRACT_TABLES
from ackfold.ledger.errors import SchemaMismatch
from ackfold.ledger.tables import missing_columns

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ackfold.ledger.tables import Ledger
    from ackfold.ledger.writer import LedgerWriter

log = logging.getLogger(__name__)

SCHEME_COLUMN: Final = "id_scheme"
# What adds the optional columns: named in every warning and error about a table without.
UPGRADE_COMMAND: Final = "ackfold upgrade"
# The `roots` tables whose lack of `id_scheme` was logged (once per process and table).
_WARNED: set[str] = set()


def roots_scheme(path: str, columns: Sequence[str] | None, wanted: int) -> int:
    """The id scheme of the roots a tracker registers into the `roots` table at `path`,
    whose stored columns are `columns` (None: no table yet, made with every column):
    `wanted`, unless the table has no `id_scheme` column, where only text-scheme roots can
    be recorded; then `TEXT`, with one warning per process that names the upgrade.

    Example:
        >>> roots_scheme("/w/roots", ["root_id", "id_scheme"], schemes.NUMERIC)
        2
        >>> roots_scheme("/w/roots", ["root_id"], schemes.NUMERIC)
        1
    """
    if columns is None or SCHEME_COLUMN in columns or wanted == schemes.TEXT:
        return wanted
    if path not in _WARNED:
        _WARNED.add(path)
        log.warning(
            "%s has no id_scheme column (contract v1): roots are registered there in the "
            "text id scheme; `%s` adds the column (restart the streams that read roots after)",
            path,
            UPGRADE_COMMAND,
        )
    return schemes.TEXT


def stored_columns(
    ledger: Ledger, name: str, spark: SparkSession | None = None
) -> list[str] | None:
    """The columns of ledger table `name` as stored now (None: no table yet): read by
    delta-rs where it reaches the warehouse (this machine, an object store), else by
    `spark` (HDFS and the like; None without a session there)."""
    from ackfold.ledger.store import is_object_store
    from ackfold.ledger.tables import local_dir
    from ackfold.ledger.writer import LedgerWriter

    if local_dir(ledger.root) is not None or is_object_store(ledger.root):
        return LedgerWriter(ledger.root).columns(name)
    if spark is None:
        return None
    try:
        return list(spark.read.format("delta").load(ledger.path(name)).columns)
    except Exception:
        return None


def require_roots_fit(path: str, columns: Sequence[str], recorded: Iterable[object]) -> None:
    """Raise `SchemaMismatch` when `roots` rows whose `id_scheme` values are `recorded`
    cannot be appended to the `roots` table at `path` of stored `columns`: a table without
    the column reads every root as text-scheme, so a root of another scheme would be read
    in the wrong one and its tree never complete. Rows of the text scheme (1 or null) fit
    any table, and are appended without the column.

    Example:
        >>> require_roots_fit("/w/roots", ["root_id"], [None, 1])
        >>> require_roots_fit("/w/roots", ["root_id"], [2])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ackfold.ledger.errors.SchemaMismatch: /w/roots has no id_scheme column (...)...
    """
    if SCHEME_COLUMN in columns:
        return
    others = sorted({str(v) for v in recorded if v is not None and v != schemes.TEXT})
    if others:
        raise SchemaMismatch(
            f"{path} has no id_scheme column (contract v1), so it records only roots of the "
            f"text id scheme ({schemes.TEXT}), and these rows have id_scheme "
            f"{', '.join(others)}: nothing was written. Register them with "
            f"id_scheme={schemes.TEXT} (Tracker(app, ledger=writer) picks it), or add the "
            f"column with `{UPGRADE_COMMAND}` (docs/ledger.md)"
        )


def upgrade(writer: LedgerWriter, tables: Sequence[str] = CONTRACT_TABLES) -> list[str]:
    """Add to the existing `tables` of `writer`'s ledger the optional columns ackfold knows
    that they lack (`tables.missing_columns`, all nullable): one metadata commit per table
    that lacks any, none otherwise. Returns what it added, as `<table path>: <column>
    <type>` lines; a second run adds nothing. Tables that do not exist are left so.

    Running Delta streams that read a table stop at its schema change and must be
    restarted; a producer appending without the new column must then append with
    `schema_mode="merge"` (or give the column): see docs/ledger.md."""
    import json

    from deltalake import DeltaTable, Field

    from ackfold.ledger.contract import delta_schema
    from ackfold.ledger.protocol import require_conditional_writes
    from ackfold.ledger.writer import writing

    require_conditional_writes(writer.ledger.root, writer.storage_options)
    added = []
    for name in tables:
        uri = writer.uri(name)
        with writing(uri):
            if not DeltaTable.is_deltatable(uri, writer.storage_options):
                continue
            table = DeltaTable(uri, storage_options=writer.storage_options)
            have = [f["name"] for f in json.loads(table.schema().to_json())["fields"]]
            missing = missing_columns(name, have)
            if missing:
                types = {f["name"]: f["type"] for f in delta_schema(name)["fields"]}
                table.alter.add_columns(
                    [Field(col, types[col], nullable=True) for col, _ in missing]
                )
        added += [f"{writer.ledger.path(name)}: {col} {kind}" for col, kind in missing]
    return added
