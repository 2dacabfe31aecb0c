"""Create the ledger's tables from a Spark session: the missing ones, once per process.

`create_tables` makes the tables of `ackfold.ledger.schema.tables` that do not exist yet, and
leaves existing ones as they are, without the columns ackfold added since they were made
(`ackfold.ledger.setup.upgrade`; `ackfold.ledger.commits.writer.LedgerWriter.create` does the same
without a JVM). It sits
above both `tables` (the schemas) and `writer` (which creates them on an object store),
so neither imports the other.

Example:
    >>> from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
    >>> create_tables(spark, Ledger("/data/warehouse"), (ACK_EVENTS, ROOTS))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ackfold.ledger.commits.driver_writers import object_store_writer
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import TABLES, Ledger, create_sql
from ackfold.ledger.storage.conflicts import conflict_of, retry_conflicts
from ackfold.ledger.storage.store import is_object_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# The tables this process has created or found (`create_tables`).
CREATED: set[str] = set()


def create_tables(
    spark: SparkSession,
    ledger: Ledger,
    tables: tuple[str, ...] = tuple(TABLES),
    *,
    writer: LedgerWriter | None = None,
) -> None:
    """Create the tables of `ledger` that do not exist yet; an existing table is left
    as it is, even without the columns ackfold added since it was made: only `ackfold
    upgrade` adds them (a schema change stops the streams that read the table).

    Once per process and table: CREATE TABLE IF NOT EXISTS loads the table's snapshot
    every time, which a process that reconciles or tracks over and over would pay on
    every run.

    On an object store delta-rs creates them (`LedgerWriter.create`): a Spark commit
    there is an unconditional PUT, which could overwrite another writer's
    (`docs/decisions/object-stores.md`). So does `writer`, the delta-rs writer that will
    commit the tables' rows (`driver_writer`): a process that writes the ledger only
    through delta-rs then never starts Spark's Delta for it (seconds at a query's start).
    Both make the same tables (`tests/spark/test_ledger_create.py`)."""
    if writer is not None or is_object_store(ledger.root):
        missing = [name for name in tables if ledger.path(name) not in CREATED]
        if missing:
            (writer or object_store_writer(ledger.root)).create(missing)
            CREATED.update(ledger.path(name) for name in missing)
        return
    for name in tables:
        path = ledger.path(name)
        if path not in CREATED:
            # Two first writers create the table at once: the loser finds it made.
            retry_conflicts(partial(create_table, spark, name, path), what=f"creating {path}")
            CREATED.add(path)


def create_table(spark: SparkSession, name: str, path: str) -> None:
    """CREATE TABLE IF NOT EXISTS ledger table `name` at `path` on Spark. A conflict with
    another process that created it meanwhile (two first starts at once: the stack's
    demo and its Airflow tasks) is what IF NOT EXISTS asked for: not a conflict to retry
    and warn of. Any other conflict raises, for `retry_conflicts`."""
    try:
        spark.sql(create_sql(name, f"delta.`{path}`"))
    except Exception as exc:
        if conflict_of(exc) is None or not table_exists(path):
            raise
        log.debug("%s: made by another writer meanwhile (%s)", path, conflict_of(exc))


def table_exists(path: str) -> bool:
    """Whether a Delta table on a local disk is at `path` (its first commit is there); False
    for any other store, where a conflict is left to the retries."""
    if "://" in path and not path.startswith("file:"):
        return False
    delta_log = Path(path.removeprefix("file://").removeprefix("file:")) / "_delta_log"
    if not delta_log.is_dir():
        return False
    # A commit or a checkpoint: a log cleaned up since may no longer hold version 0.
    return any(delta_log.glob("[0-9]*.json")) or any(delta_log.glob("[0-9]*.checkpoint*"))
