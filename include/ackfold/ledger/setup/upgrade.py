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
    >>> from ackfold.ledger.commits.writer import LedgerWriter
    >>> writer = LedgerWriter(tempfile.mkdtemp())
    >>> _ = writer.create(["roots", "ack_events"])  # made by this release: every column
    >>> upgrade(writer)
    []
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ackfold.ledger.schema.contract import CONTRACT_TABLES
from ackfold.ledger.schema.tables import missing_columns

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.ledger.schema.tables import Ledger

log = logging.getLogger(__name__)


def stored_columns(
    ledger: Ledger, name: str, spark: SparkSession | None = None
) -> list[str] | None:
    """The columns of ledger table `name` as stored now (None: no table yet): read by
    delta-rs where it reaches the warehouse (this machine, an object store), else by
    `spark` (HDFS and the like; None without a session there)."""
    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.ledger.schema.tables import local_dir
    from ackfold.ledger.storage.store import is_object_store

    if local_dir(ledger.root) is not None or is_object_store(ledger.root):
        return LedgerWriter(ledger.root).columns(name)
    if spark is None:
        return None
    try:
        return list(spark.read.format("delta").load(ledger.path(name)).columns)
    except Exception:
        return None


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

    from ackfold.ledger.commits.table_rows import writing
    from ackfold.ledger.schema.contract import delta_schema

    writer.store.require_conditional_writes()
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
