"""The Spark engine's reads of the derived tables, as parquet file lists from delta-rs.

A Delta read on Spark (`spark.read.format("delta")`) costs Spark jobs before any row is
read: the snapshot's state ("Compute snapshot for version"), then the file listing of
every scan that has a filter ("Filtering files for query"), once per plan that names the
table. Worse, a cached plan that names a Delta table is planned again after every commit
to it (`CacheManager.recacheByPlan`, which Spark's save and Delta's commands call): each
of the reconciler's commits to `root_state` re-ran the file listing of its cached fold,
eight small jobs after `append_new`'s write alone (docs/benchmarks.md, issue 59).

`delta_frame` reads the table's current data files as delta-rs names them (the log's add
actions, partition values from the Hive-style directories their paths name), as the
reconciler already reads `ack_events` (`Reconciler._events_of`). A plan over those files
names no Delta table: Spark runs no job to plan it, and no commit plans it again. Where
the files do not hold the table's rows as they are (deletion vectors, column mapping:
`ackfold.ledger.storage.vectors`), or a data file's path does not name its partition
values, it is the Delta read as before.

Example:
    >>> state = delta_frame(spark, ledger, ROOT_STATE, keep=lambda p: p["status"] == "pending")
    ... # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from ackfold.ledger.errors import UnreadableFiles
from ackfold.ledger.schema.tables import Ledger, spark_schema
from ackfold.spark.frames import local_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("ackfold.reconcile")

# How Hive-style paths (Spark's, delta-rs's) name a null partition value.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"

Partition = Mapping[str, Any]


def delta_frame(
    spark: SparkSession,
    ledger: Ledger,
    table: str,
    *,
    keep: Callable[[Partition], bool] | None = None,
) -> DataFrame:
    """The rows of ledger table `table`, at its current version, as a Spark DataFrame
    over its data files (no Delta snapshot job); the Delta read where its files cannot
    be read as they are. `keep` (partition values by column -> bool) leaves out the files
    of the partitions it refuses, before Spark sees them: the caller's filter on the
    partition columns still applies, this only spares Spark the listing of the others."""
    files = data_files(ledger, table, keep=keep)
    if files is None:
        return spark.read.format("delta").load(ledger.path(table))
    schema = spark_schema(table)
    if not files:
        return local_frame(spark, [], schema)
    base = spark_uri(ledger, ledger.path(table))
    reader = spark.read.schema(schema).option("basePath", base)
    return reader.parquet(*(spark_uri(ledger, f) for f in files))


def data_files(
    ledger: Ledger, table: str, *, keep: Callable[[Partition], bool] | None = None
) -> list[str] | None:
    """The URIs of the data files of `table`'s current version (those of the partitions
    `keep` keeps), as delta-rs names them; None when they do not hold the table's rows
    as they are, or a file's path does not name its partition values (a layout that
    Spark cannot read them from)."""
    from deltalake import DeltaTable

    from ackfold.embedded.log import absolute_uri
    from ackfold.ledger.storage.add_actions import add_actions
    from ackfold.ledger.storage.run_store import options_for
    from ackfold.ledger.storage.store import delta_uri
    from ackfold.ledger.storage.vectors import require_plain_files

    path = ledger.path(table)
    found = DeltaTable(delta_uri(path), storage_options=options_for(path))
    try:
        require_plain_files(found, path)
    except UnreadableFiles as exc:
        log.info("reconcile: %s read through Delta: %s", table, exc)
        return None
    columns = list(found.metadata().partition_columns)
    actions = add_actions(found)
    values = {c: actions.column(f"partition.{c}").to_pylist() for c in columns}
    base = found.table_uri.rstrip("/")
    files = []
    for i, name in enumerate(actions.column("path").to_pylist()):
        partition = {c: values[c][i] for c in columns}
        if columns and not unquote(name).startswith(hive_prefix(partition)):
            log.info("reconcile: %s read through Delta: %s names no partition", table, name)
            return None
        if keep is None or keep(partition):
            files.append(absolute_uri(base, name))
    return files


def hive_prefix(partition: Partition) -> str:
    """The directories that name `partition`'s values, as Spark and delta-rs write them.

    Example:
        >>> from datetime import date
        >>> hive_prefix({"first_event_date": date(2026, 12, 5), "status": None})
        'first_event_date=2026-12-05/status=__HIVE_DEFAULT_PARTITION__/'
    """
    parts = (f"{c}={HIVE_NULL if v is None else v}" for c, v in partition.items())
    return "".join(f"{part}/" for part in parts)


def spark_uri(ledger: Ledger, uri: str) -> str:
    """A URI as delta-rs names it, in the warehouse's scheme for Spark (`s3a://` where
    delta-rs says `s3://`)."""
    scheme = urlparse(ledger.root).scheme.lower()
    if scheme in ("s3a", "s3n") and uri.startswith("s3://"):
        return f"{scheme}{uri[2:]}"
    return uri
