"""Ledger maintenance, what `ackfold_maintenance` runs daily: retention, OPTIMIZE, VACUUM.

1. **Retention.** The `ack_events` of roots that are `completed` or `completed_late`, whose
   status changed and whose last event came more than `maintenance.retention` ago, are
   deleted. A complete tree ignores every later event (the reconciler keeps its status
   and forgets its event hashes), so its events only serve `ackfold show` and audits; the
   root's `roots` and `root_state` rows stay. A root in any other status keeps every
   event: it may still complete, be replayed or be looked into. Only events older than
   the cut-off go, so a late event of such a root goes on a later run. A run reads the
   roots changed since the last run's cut-off, and all of them once a week, not every
   settled root the ledger keeps (`ackfold.ledger.housekeeping.retention`).
   The producers' `sent_messages` and the `quality_results` older than the cut-off go
   too: quality runs only look at their window, and trends older than that are summaries
   to export, not rows to keep forever.
2. **OPTIMIZE.** `ack_events` and `roots` are Z-ordered by `root_id` (ids are hashes:
   without it a point lookup reads the `root_id` column of every file); `replay_log`,
   `app_progress` and `root_state` are compacted (`COMPACTED`: small appends, and the
   reconciles' MERGEs' small files in each partition). `dead_letters` and
   `unmatched_events` are rewritten by the reconciler and the replay engine as they go.
3. **VACUUM** every ledger table, keeping `maintenance.vacuum_retention` (Delta's 7 days
   by default) of unreferenced files for running streams and readers. Delta 4 reads the
   retention from the table property `delta.deletedFileRetentionDuration`, which this
   sets where it differs. `ack_events` keeps more while it has commits no reconcile has
   folded yet: every file they added stays (`store_maintenance.vacuum_hours`).
4. **Checkpoints and log cleanup** of every table, as delta-rs does it
   (`delta_logs.tidy_logs`): `ack_events`' log keeps the commits no reconcile has
   folded yet.

Safe with the rest of ackfold running:
- The retention DELETE is a MERGE that rewrites files, never with deletion vectors: the
  tables stay at reader version 1 for delta-rs (checked before and after).
- The reconciler reads the files `ack_events`' log says were appended since its mark,
  skipping commits that remove rows (as Spark's `skipChangeCommits` does) and files
  added without a data change (OPTIMIZE's).
- Apps' appends do not conflict with the MERGE (Delta's WriteSerializable isolation).

The run that takes the ledger's turn, chooses the engine and reports what these steps
did is `ackfold.maintenance.run_maintenance`; every caller (the DAG, `ackfold maintain`,
the Spark job) goes through it.

Example:
    >>> from ackfold.maintenance import run_maintenance
    >>> run_maintenance(settings)["events_deleted"]        # doctest: +SKIP
    120440
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import Settings
from ackfold.errors import AckfoldError
from ackfold.ledger.commits import dml
from ackfold.ledger.commits.fence import Fence, held, spark_commit, version_of
from ackfold.ledger.housekeeping.delta_logs import tidy_logs, vacuumed
from ackfold.ledger.housekeeping.retention import CHANGED, retention_marks, retention_since
from ackfold.ledger.housekeeping.store_maintenance import (
    COMPACTED,
    RETENTION_PROPERTY,
    SETTLED,
    Z_ORDERED,
    Step,
    no_steps,
    report_cutoffs,
    vacuum_hours,
)
from ackfold.ledger.schema.encoding import spark_codec
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ROOT_STATE,
    TABLES,
    Ledger,
)
from ackfold.ledger.setup.create import create_tables
from ackfold.ledger.storage.conflicts import retry_conflicts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("ackfold.maintenance")


class MaintenanceError(AckfoldError, RuntimeError):
    """A table cannot be maintained safely as it is (e.g. deletion vectors are on)."""


# Delta Spark writes VACUUM's START and END commits (with the files and bytes deleted)
# only with this on; delta-rs always does. The summary's `removed` reads them.
VACUUM_LOGGING: Final = "spark.databricks.delta.vacuum.logging.enabled"


def spark_steps_safe(settings: Settings) -> bool:
    """Whether the Spark engine may run maintenance's steps in Spark here: a warehouse
    that is no object store, where Spark's commits are put-if-absent. Elsewhere every
    step is delta-rs's, whatever the engine: the apps' appends there are delta-rs's
    conditional commits, which a Spark commit (an unconditional PUT) could overwrite."""
    from ackfold.ledger.storage.protocol import unsafe_spark_commits
    from ackfold.ledger.storage.store import is_object_store

    if is_object_store(settings.table_root):
        return False
    return unsafe_spark_commits(settings.table_root, settings.spark.conf) is None


def maintain_steps(
    spark: SparkSession | None,
    settings: Settings,
    *,
    now: datetime | None = None,
    step: Step = no_steps,
) -> dict[str, Any]:
    """Retention, then OPTIMIZE, then VACUUM, then checkpoints and log cleanup; returns
    what each step did. `step(name)` wraps each step (`STEPS`).

    The caller holds the ledger's turn (`ackfold.ledger.commits.lease.ledger_turn`: reconciles,
    replays and maintenance take turns on every host), as `run_maintenance` does; without
    it the first claim raises `Unfenced`. The apps go on appending; a commit that meets
    one of theirs is retried (`ackfold.ledger.storage.conflicts`).

    With a session where Spark's commits are safe (`spark_steps_safe`) the steps are
    Spark's; without one (`spark` None: the embedded engine, in an Airflow task with no
    JVM), or on an object store, they are delta-rs's
    (`ackfold.ledger.housekeeping.store_maintenance`)."""
    if spark is None or not spark_steps_safe(settings):
        from ackfold.ledger.housekeeping.store_maintenance import maintain_on_store

        return maintain_on_store(settings, now=now, step=step)
    return _maintain(spark, settings, now, step)


def _maintain(
    spark: SparkSession, settings: Settings, now: datetime | None, step: Step
) -> dict[str, Any]:
    started = time.monotonic()
    ledger = Ledger(settings.table_root)
    create_tables(spark, ledger)
    # Claimed before anything is read, as on the embedded engine: the retention's MERGE
    # and DELETEs carry the epoch (`spark_commit`); OPTIMIZE, ALTER and VACUUM take no
    # transaction in Delta Spark, so the lease is checked before each (`_sql`).
    fence = held(settings.table_root, "maintenance")
    fence.claim([ledger.path(table) for table in TABLES])
    now = (now or datetime.now(UTC)).astimezone(UTC)
    for table in TABLES:
        check_reader_version(spark, ledger.path(table))
    with spark_codec(spark):  # the files it rewrites in the ledger's codec
        with step("retention"):
            summary = expire_events(spark, settings, now=now)
            summary["reports_deleted"] = expire_reports(spark, settings, now=now)
        with step("optimize"):
            for table in Z_ORDERED:
                statement = f"OPTIMIZE delta.`{ledger.path(table)}` ZORDER BY (root_id)"
                _sql(spark, statement, fence)
            for table in COMPACTED:
                _sql(spark, f"OPTIMIZE delta.`{ledger.path(table)}`", fence)
    with step("vacuum"):
        before = {table: version_of(ledger.path(table)) or 0 for table in TABLES}
        for table in TABLES:
            hours = vacuum_hours(settings, ledger, table)
            _set_retention(spark, ledger.path(table), hours, fence)
        logging_was = spark.conf.get(VACUUM_LOGGING, None)
        spark.conf.set(VACUUM_LOGGING, "true")
        try:
            for table in TABLES:
                _sql(spark, f"VACUUM delta.`{ledger.path(table)}`", fence)
        finally:
            if logging_was is None:
                spark.conf.unset(VACUUM_LOGGING)
            else:
                spark.conf.set(VACUUM_LOGGING, logging_was)
        summary["removed"] = {table: vacuumed(ledger, table, before[table]) for table in TABLES}
    with step("logs"):
        summary["logs_kept"] = tidy_logs(ledger)
    for table in TABLES:
        check_reader_version(spark, ledger.path(table))
    summary["optimized"] = [*Z_ORDERED, *COMPACTED]
    summary["vacuumed"] = list(TABLES)
    summary["checkpointed"] = list(TABLES)
    summary["protocol"] = "spark"
    summary["seconds"] = round(time.monotonic() - started, 1)
    log.info("maintenance (Spark): %s", summary)
    return summary


def expire_events(
    spark: SparkSession, settings: Settings, *, now: datetime | None = None
) -> dict[str, Any]:
    """Delete the events of roots settled before `now - maintenance.retention`."""
    from pyspark.sql import functions as F

    ledger = Ledger(settings.table_root)
    now = (now or datetime.now(UTC)).astimezone(UTC)
    cutoff = now - settings.maintenance.retention  # aware: Spark reads naive as local
    path = ledger.path(ROOT_STATE)
    since = retention_since(_properties(spark, path), cutoff)
    wanted = (
        (F.col("first_event_date") < F.lit(cutoff.date()))  # prunes partitions
        & F.col("status").isin(*SETTLED)
        & (F.col("status_changed_at") < F.lit(cutoff))
        & (F.col("last_event_at") < F.lit(cutoff))
    )
    if since is not None:
        # Only what changed since the last run: Delta skips the other files by their stats.
        changed = [F.col(column) >= F.lit(since) for column in CHANGED]
        wanted &= changed[0] | changed[1]
    expired = spark.read.format("delta").load(path).where(wanted).select("root_id").distinct()
    expired = expired.cache()
    try:
        roots = expired.count()
        deleted = 0
        if roots:
            # The event_time bound lets file statistics skip every file written since the
            # cut-off (appends are in time order): only old files are rewritten.
            # Its own metrics, not the table's last commit: an app may have appended since.
            metrics = spark_commit(
                settings.table_root,
                ledger.path(ACK_EVENTS),
                lambda txn: dml.merge(
                    ledger.path(ACK_EVENTS),
                    expired,
                    on=f"t.root_id = s.root_id AND t.event_time < {dml.literal(cutoff)}",
                    clauses=["WHEN MATCHED THEN DELETE"],
                    txn=txn,
                ),
                what=f"retention MERGE into {ledger.path(ACK_EVENTS)}",
            )
            deleted = dml.metric(metrics, "num_deleted_rows")
    finally:
        expired.unpersist()
    marks = ", ".join(f"'{k}' = '{v}'" for k, v in retention_marks(cutoff, since).items())
    fence = held(settings.table_root, "maintenance")
    _sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({marks})", fence)
    log.info(
        "retention: %d event(s) of %d settled root(s) before %s deleted", deleted, roots, cutoff
    )
    return {
        "retention_cutoff": cutoff.isoformat(),
        "retention_since": since.isoformat() if since else None,
        "roots_expired": roots,
        "events_deleted": deleted,
    }


def expire_reports(spark: SparkSession, settings: Settings, *, now: datetime) -> dict[str, int]:
    """Delete the `sent_messages` and `quality_results` rows older than the retention, and
    the `app_progress` rows older than `maintenance.progress_retention`; the number deleted
    per table."""
    ledger = Ledger(settings.table_root)
    cutoff = now.astimezone(UTC) - settings.maintenance.retention
    deleted = {}
    for table, column, before in report_cutoffs(settings, now.astimezone(UTC)):
        old = f"{column} < {dml.literal(before)}"
        deleted[table] = spark.read.format("delta").load(ledger.path(table)).where(old).count()
        if deleted[table]:  # no empty commit
            what = f"retention delete in {ledger.path(table)}"
            delete = partial(_delete, spark, ledger.path(table), old)
            spark_commit(settings.table_root, ledger.path(table), delete, what=what)
    log.info("retention: %s before %s deleted", deleted, cutoff)
    return deleted


def _set_retention(spark: SparkSession, path: str, hours: int, fence: Fence) -> None:
    """Make VACUUM keep `hours` of unreferenced files. Delta 4 ignores VACUUM's RETAIN (but
    0) and reads the table's `delta.deletedFileRetentionDuration`, so that is what is set,
    once (a metadata-only commit, which the reconciler's stream passes)."""
    wanted = f"interval {hours} hours"
    if _properties(spark, path).get(RETENTION_PROPERTY) != wanted:
        _sql(
            spark,
            f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{RETENTION_PROPERTY}' = '{wanted}')",
            fence,
        )


def _properties(spark: SparkSession, path: str) -> dict[str, str]:
    """The table properties of the Delta table at `path`."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail is not None
    return dict(detail["properties"] or {})


def _delete(spark: SparkSession, path: str, where: str, txn: tuple[str, int] | None) -> None:
    with dml.idempotent(spark, txn):
        dml.delete(spark, path, where)


def _sql(spark: SparkSession, statement: str, fence: Fence) -> None:
    """Run one committing statement, retried on a Delta conflict (e.g. OPTIMIZE against the
    retention's MERGE of another run), each try only while `fence`'s run holds the lease
    (Delta Spark's OPTIMIZE, ALTER and VACUUM carry no transaction to fence them with)."""

    def run() -> Any:
        fence.check(statement)
        return spark.sql(statement)

    retry_conflicts(run, what=statement)


def check_reader_version(spark: SparkSession, path: str) -> None:
    """Raise `MaintenanceError` unless the table at `path` is readable by delta-rs:
    reader version 1, and deletion vectors off (a DELETE would otherwise write them)."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail is not None
    properties = detail["properties"] or {}
    if detail["minReaderVersion"] != 1 or properties.get("delta.enableDeletionVectors") == "true":
        raise MaintenanceError(
            f"{path} has reader version {detail['minReaderVersion']} or deletion vectors on: "
            "ackfold needs reader version 1 for delta-rs; set the table property "
            "delta.enableDeletionVectors=false and rewrite it (REORG TABLE ... APPLY (PURGE))"
        )
