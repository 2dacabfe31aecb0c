"""What a reconcile reads of `root_state`, and how it writes it back.

`root_state` is partitioned by `first_event_date`, then `status`, so each read below is a
set of partitions, never settled history:

- `open_state`: the full state of the roots the reconciler keeps open. Unsettled roots
  (`pending`, `timed_out`, `failed`: waiting for events, a timeout or a replay) wherever
  they sit in time, so a root is never stranded, however long the reconciler was away;
  and superseded roots (`replayed`, `dead_lettered`) first seen within
  `reconcile.lookback`, which a late completion may still turn `completed_late`.
- `known_roots`: the ids of the other roots first seen since a date: what tells an event
  of a settled root (ignored) from the first event of a new one.
- `merge_updates` rewrites only the rows that changed, in only the partitions they were
  in (a status change moves a row to its new partition); `append_new` appends the roots
  seen for the first time.

Example:
    >>> open_state(spark, ledger, since=date(2026, 11, 22)).count()   # doctest: +SKIP
    12
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import TYPE_CHECKING, Final

from ackfold.ledger import status
from ackfold.ledger.conflicts import retry_conflicts
from ackfold.ledger.tables import ROOT_STATE, ROOT_STATE_DDL, Ledger, column_names

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

COLUMNS: Final = column_names(ROOT_STATE_DDL)


def in_open_partitions(since: date) -> Column:
    """The partitions of the roots the reconciler keeps open (a partition filter)."""
    from pyspark.sql import functions as F

    return F.col("status").isin(*status.UNSETTLED) | (
        F.col("status").isin(*status.SUPERSEDED) & (F.col("first_event_date") >= F.lit(since))
    )


def open_state(
    spark: SparkSession, ledger: Ledger, *, since: date, app: str | None = None
) -> DataFrame:
    """The state of the roots the reconciler keeps open (`since`: the window's first day)."""
    return _read(spark, ledger, app).where(in_open_partitions(since))


def known_roots(
    spark: SparkSession, ledger: Ledger, *, since: date, app: str | None = None
) -> DataFrame:
    """The ids of the roots first seen on or after `since` that are not unsettled."""
    from pyspark.sql import functions as F

    settled = (F.col("first_event_date") >= F.lit(since)) & ~F.col("status").isin(*status.UNSETTLED)
    return _read(spark, ledger, app).where(settled).select("root_id")


def _read(spark: SparkSession, ledger: Ledger, app: str | None) -> DataFrame:
    from pyspark.sql import functions as F

    state = spark.read.format("delta").load(ledger.path(ROOT_STATE))
    return state if app is None else state.where(F.col("app") == F.lit(app))


def merge_updates(
    spark: SparkSession,
    ledger: Ledger,
    rows: DataFrame,
    partitions: Iterable[tuple[date, str]],
    txn: tuple[str, int] | None,
) -> int:
    """MERGE `rows` (root_state rows with their `prior_date` and `prior_status`) over the
    rows they replace, reading only `partitions` (their prior (date, status) pairs);
    the number of rows rewritten."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    pairs = sorted(set(partitions))
    if not pairs:
        return 0
    dates = sorted({d for d, _ in pairs})
    statuses = sorted({s for _, s in pairs})
    target = DeltaTable.forPath(spark, ledger.path(ROOT_STATE)).alias("t")
    # Literal partition bounds first, so Delta reads only those partitions.
    condition = (
        F.col("t.first_event_date").isin(*dates)
        & F.col("t.status").isin(*statuses)
        & (F.col("t.first_event_date") == F.col("s.prior_date"))
        & (F.col("t.status") == F.col("s.prior_status"))
        & (F.col("t.root_id") == F.col("s.root_id"))
    )
    with idempotent(spark, txn):
        metrics = retry_conflicts(
            lambda: (
                target.merge(rows.alias("s"), condition)
                .whenMatchedUpdate(set={c: F.col(f"s.{c}") for c in COLUMNS})
                .execute()
            ),
            what=f"MERGE into {ledger.path(ROOT_STATE)}",
        )
    first = metrics.first() if metrics is not None else None
    return int(first["num_affected_rows"]) if first is not None else 0


def append_new(ledger: Ledger, rows: DataFrame, txn: tuple[str, int] | None) -> None:
    """Append the rows of roots seen for the first time; a re-run batch appends nothing."""
    writer = rows.select(*COLUMNS).write.format("delta").mode("append")
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
    path = ledger.path(ROOT_STATE)
    retry_conflicts(lambda: writer.save(path), what=f"append to {path}")


class idempotent:
    """Delta's idempotent-DML session settings for one MERGE: a re-run batch is skipped.

    The fold is idempotent on its own (seen event hashes); this only saves the wasted
    MERGE when a run dies between its commit and its checkpoint's."""

    def __init__(self, spark: SparkSession, txn: tuple[str, int] | None) -> None:
        self.conf = spark.conf
        self.txn = txn

    def __enter__(self) -> None:
        if self.txn is not None:
            self.conf.set("spark.databricks.delta.write.txnAppId", self.txn[0])
            self.conf.set("spark.databricks.delta.write.txnVersion", str(self.txn[1]))

    def __exit__(self, *exc: object) -> None:
        if self.txn is not None:
            self.conf.unset("spark.databricks.delta.write.txnAppId")
            self.conf.unset("spark.databricks.delta.write.txnVersion")
