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
- `settled_before`: which of a few root ids have a settled row first seen before a date,
  for both engines (delta-rs): the events of such a root are copies, not events waiting
  for a root that is still unknown. Asked only of the roots a step would park for the
  first time (rare: an event before its init, an event of a long-settled root read
  again), it reads the ids of older history, never on the common path.
- `merge_updates` rewrites only the rows that changed, in only the partitions they were
  in (a status change moves a row to its new partition); `append_new` appends the roots
  seen for the first time.

Example:
    >>> open_state(spark, ledger, since=date(2026, 11, 22)).count()   # doctest: +SKIP
    12
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Final

from ackfold.ledger.commits import dml
from ackfold.ledger.commits.fence import spark_commit
from ackfold.ledger.reading.sql import sql_date, sql_str
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ROOT_STATE, ROOT_STATE_DDL, Ledger, column_names
from ackfold.reconcile.spark_reads import Partition, delta_frame

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from ackfold.config import Settings

COLUMNS: Final = column_names(ROOT_STATE_DDL)


def open_partitions_sql(since: date) -> str:
    """The partitions of the roots the reconciler keeps open, as a SQL condition: one text
    for Spark (`in_open_partitions`) and for delta-rs (`ackfold.reconcile.quiet`), so the
    quiet check and the Spark run always read the same roots."""
    unsettled = ", ".join(sql_str(s) for s in status.UNSETTLED)
    superseded = ", ".join(sql_str(s) for s in status.SUPERSEDED)
    return (
        f"status IN ({unsettled}) OR "
        f"(status IN ({superseded}) AND first_event_date >= {sql_date(since)})"
    )


def in_open_partitions(since: date) -> Column:
    """The partitions of the roots the reconciler keeps open (a partition filter)."""
    from pyspark.sql import functions as F

    return F.expr(open_partitions_sql(since))


def open_state(
    spark: SparkSession, ledger: Ledger, *, since: date, app: str | None = None
) -> DataFrame:
    """The state of the roots the reconciler keeps open (`since`: the window's first day)."""

    def kept(partition: Partition) -> bool:
        day, state = partition["first_event_date"], partition["status"]
        superseded = state in status.SUPERSEDED and day is not None and day >= since
        return state in status.UNSETTLED or superseded

    return _read(spark, ledger, app, kept).where(in_open_partitions(since))


def known_roots(
    spark: SparkSession, ledger: Ledger, *, since: date, app: str | None = None
) -> DataFrame:
    """The ids of the roots first seen on or after `since` that are not unsettled."""
    from pyspark.sql import functions as F

    def kept(partition: Partition) -> bool:
        day = partition["first_event_date"]
        return day is not None and day >= since and partition["status"] not in status.UNSETTLED

    settled = (F.col("first_event_date") >= F.lit(since)) & ~F.col("status").isin(*status.UNSETTLED)
    return _read(spark, ledger, app, kept).where(settled).select("root_id")


def _read(
    spark: SparkSession, ledger: Ledger, app: str | None, keep: Callable[[Partition], bool]
) -> DataFrame:
    """`root_state`'s rows in the partitions `keep` keeps, read from its data files: no
    Delta snapshot job, and no plan that a commit to `root_state` makes Spark plan again
    (`ackfold.reconcile.spark_reads`)."""
    from pyspark.sql import functions as F

    state = delta_frame(spark, ledger, ROOT_STATE, keep=keep)
    return state if app is None else state.where(F.col("app") == F.lit(app))


def window_start(settings: Settings, now: datetime, oldest_event: datetime | None = None) -> date:
    """The first day of a step's window: a lookback before `now`, or before the step's
    oldest new event (after an outage, its late events meet the rows of roots first seen
    during it), but never more than the events' retention before `now`. Superseded roots
    first seen since are kept open, and the ids of every other root first seen since tell
    its events from new ones.

    Example:
        >>> from ackfold.config import load_settings
        >>> now, outage = datetime(2027, 1, 10, tzinfo=UTC), datetime(2027, 1, 5, tzinfo=UTC)
        >>> settings = load_settings(reconcile={"lookback": "2d"})
        >>> window_start(settings, now), window_start(settings, now, outage)
        (datetime.date(2027, 1, 8), datetime.date(2027, 1, 3))
    """
    start = now
    if oldest_event is not None:
        start = max(min(now, oldest_event.astimezone(UTC)), now - settings.maintenance.retention)
    return (start - settings.reconcile.lookback).date()


def settled_before(
    ledger: Ledger, root_ids: Collection[int], day: date, app: str | None = None
) -> set[int]:
    """The ids among `root_ids` whose root has a `root_state` row first seen before `day`
    that is not unsettled: the roots whose events a step with `day` as its first day
    would otherwise take for events still waiting for their root."""
    if not root_ids:
        return set()
    import pyarrow as pa
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    from ackfold.ledger.storage.run_store import options_for
    from ackfold.ledger.storage.store import delta_uri
    from ackfold.ledger.storage.vectors import plain_dataset

    path = ledger.path(ROOT_STATE)
    table = DeltaTable(delta_uri(path), storage_options=options_for(path))
    keep = (
        (ds.field("first_event_date") < day)
        & ~ds.field("status").isin(list(status.UNSETTLED))
        & ds.field("root_id").isin(sorted(root_ids))
    )
    if app is not None:
        # Cast: delta-rs's MERGE writes strings as `string_view`, ackfold's appends as
        # `string`, and Arrow has no `equal` of the one with the other.
        keep = keep & (ds.field("app").cast(pa.string()) == app)
    found = plain_dataset(table, path).to_table(columns=["root_id"], filter=keep)
    return set(found.column("root_id").to_pylist())


def merge_updates(ledger: Ledger, rows: DataFrame, partitions: Iterable[tuple[date, str]]) -> int:
    """MERGE `rows` (root_state rows with their `prior_date` and `prior_status`) over the
    rows they replace, reading only `partitions` (their prior (date, status) pairs);
    the number of rows rewritten."""
    pairs = sorted(set(partitions))
    if not pairs:
        return 0
    # Literal partition bounds first, so Delta reads only those partitions.
    on = " AND ".join(
        (
            dml.in_list("t.first_event_date", sorted({d for d, _ in pairs})),
            dml.in_list("t.status", sorted({status.checked(s) for _, s in pairs})),
            "t.first_event_date = s.prior_date",
            "t.status = s.prior_status",
            "t.root_id = s.root_id",
        )
    )
    path = ledger.path(ROOT_STATE)
    clauses = [f"WHEN MATCHED THEN UPDATE SET {dml.assignments(COLUMNS)}"]
    metrics = spark_commit(
        ledger.root,
        path,
        lambda txn: dml.merge(path, rows, on=on, clauses=clauses, txn=txn),
        what=f"MERGE into {path}",
    )
    return dml.metric(metrics, "num_affected_rows")


def append_new(ledger: Ledger, rows: DataFrame) -> None:
    """Append the rows of roots seen for the first time (a re-run batch has none left:
    its first run's rows are in the state it reads, `Reconciler.step`). Under the lease the
    append carries its epoch: a retry whose first try landed is skipped, and a run that
    lost the lease appends nothing (`ackfold.ledger.commits.fence`)."""
    writer = rows.select(*COLUMNS).write.format("delta").mode("append")
    path = ledger.path(ROOT_STATE)
    spark_commit(
        ledger.root,
        path,
        lambda txn: dml.with_txn(writer, txn).save(path),
        what=f"append to {path}",
    )
