"""Upgrades of a ledger written by an earlier ackfold to the layout this one writes.

`root_state` was partitioned by `first_event_date` alone and kept the ids of each root's
latest and earliest-fail events (`last_event_id`, `fail_event_id`). It is now partitioned
by `first_event_date` and `status` (the reconciler reads the partitions of open roots
wherever they sit in time, and counts roots by status from file metadata), and ties
between events are broken by what the state keeps, so those two ids are gone.

`upgrade_root_state` rewrites an older table once, in one commit: a reader sees the old
version or the new one, never a mix. It then restores the NOT NULL of the columns that
the rewrite made nullable (one commit each; a run killed in between finishes them next
time). A table in the current layout is left as it is.

Example:
    >>> upgrade_root_state(spark, Ledger("/data/warehouse"))        # doctest: +SKIP
    False
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

from ackfold.ledger.conflicts import retry_conflicts
from ackfold.ledger.dml import with_txn
from ackfold.ledger.fence import spark_commit
from ackfold.ledger.tables import (
    ROOT_STATE,
    ROOT_STATE_DDL,
    ROOT_STATE_PARTITIONS,
    Ledger,
    column_names,
    column_specs,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("ackfold.ledger")


def upgrade_root_state(spark: SparkSession, ledger: Ledger) -> bool:
    """Bring `root_state` to the current layout; whether anything had to change. Once per
    process and table: a process that reconciles over and over checks it once."""
    path = ledger.path(ROOT_STATE)
    if path in _CURRENT:
        return False
    changed = _upgrade(spark, path, ledger.root)
    _CURRENT.add(path)
    return changed


# The root_state tables this process has found, or made, current (`upgrade_root_state`).
_CURRENT: set[str] = set()


def _upgrade(spark: SparkSession, path: str, ledger_root: str) -> bool:
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail is not None
    changed = False
    if tuple(detail["partitionColumns"]) != ROOT_STATE_PARTITIONS:
        log.info("root_state: rewriting it partitioned by %s", ", ".join(ROOT_STATE_PARTITIONS))
        spark_commit(
            ledger_root,
            path,
            lambda txn: with_txn(
                spark.read.format("delta")
                .load(path)
                .select(*column_names(ROOT_STATE_DDL))
                .write.format("delta")
                .mode("overwrite")
                .option("overwriteSchema", "true")
                .partitionBy(*ROOT_STATE_PARTITIONS),
                txn,
            ).save(path),
            what=f"rewriting {path}",
        )
        changed = True
    nullable = {f.name for f in spark.read.format("delta").load(path).schema if f.nullable}
    for name, _, may_be_null in column_specs(ROOT_STATE_DDL):
        if not may_be_null and name in nullable:
            statement = f"ALTER TABLE delta.`{path}` ALTER COLUMN {name} SET NOT NULL"
            retry_conflicts(partial(spark.sql, statement), what=statement)
            changed = True
    return changed
