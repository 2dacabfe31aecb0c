"""Ledger maintenance on an object store, all in delta-rs: the same three steps as
`ackfold.ledger.housekeeping.maintenance` (retention, compaction, VACUUM), committed with the only
protocol that is safe there while the apps go on appending.

Spark's commits on `s3a://` are unconditional PUTs of the next log file: a retention
MERGE, an OPTIMIZE or a property change by Spark could overwrite an app's append that
delta-rs committed a moment before (`docs/decisions/object-stores.md`). So here:

1. **Retention**: the settled roots are read from `root_state` (delta-rs, partitions
   pruned by `first_event_date` and `status`, files by what changed since the last run:
   `ackfold.ledger.housekeeping.retention`), and their old events deleted from
   `ack_events` by a delta-rs MERGE; `sent_messages` and `quality_results` older than
   the cut-off by a delta-rs DELETE. delta-rs writes no deletion vectors: the tables stay
   at reader version 1.
2. **Compaction**: `ack_events` and `roots` Z-ordered by `root_id`
   (`DeltaTable.optimize.z_order`), `COMPACTED` (`replay_log`, `app_progress`,
   `root_state`) compacted (`optimize.compact`).
3. **VACUUM**: `DeltaTable.vacuum`, keeping `maintenance.vacuum_retention`, set first as
   the table property `delta.deletedFileRetentionDuration` where it differs; full, as
   Spark's, where deltalake keeps the younger files in that mode (`full_vacuum`). Never the
   files no reconcile has folded yet: while `ack_events` has commits after the mark of
   the reconcile of every app (`ackfold.ledger.commits.marks.unfolded_since`), its VACUUM keeps
   every file removed since the first of them (`vacuum_hours`), and says so.
4. **Checkpoints and log cleanup** (`tidy_logs`): a checkpoint of every table, then the
   log files older than `delta.logRetentionDuration` (30 days) deleted; `ack_events`'
   only once no commit that a reconcile has not folded would go with them.

Spark's maintenance (`ackfold.ledger.housekeeping.maintenance`) runs the same steps on the same
tables (`Z_ORDERED`, `COMPACTED`), its last two with these functions; the conformance
suite compares the tables both leave.

Each commit is retried on a conflict (`retry_conflicts`): an app's append that lands
first makes the next try read the table again.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime, timedelta
from functools import partial
from importlib.metadata import version
from typing import Any, Final

from ackfold.config import Settings
from ackfold.errors import AckfoldError
from ackfold.ledger.commits.driver_writers import object_store_writer
from ackfold.ledger.commits.fence import commit as fence_commit
from ackfold.ledger.commits.fence import held
from ackfold.ledger.commits.marks import unfolded_since
from ackfold.ledger.errors import LedgerConflict
from ackfold.ledger.housekeeping.delta_logs import tidy_logs, vacuumed
from ackfold.ledger.housekeeping.retention import (
    CHANGED,
    changed_file,
    retention_marks,
    retention_since,
)
from ackfold.ledger.schema import status
from ackfold.ledger.schema.encoding import writer_properties
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    APP_PROGRESS,
    QUALITY_RESULTS,
    REPLAY_LOG,
    ROOT_STATE,
    ROOTS,
    SENT_MESSAGES,
    TABLES,
    Ledger,
)
from ackfold.ledger.storage.vectors import plain_dataset

log = logging.getLogger("ackfold.maintenance")
RETENTION_PROPERTY: Final = "delta.deletedFileRetentionDuration"
SETTLED: Final = (status.COMPLETED, status.COMPLETED_LATE)
Z_ORDERED: Final = (ACK_EVENTS, ROOTS)
# Small appends: the replay log, and the heartbeat (a commit per app every 30 s); and
# `root_state`, whose MERGEs leave a few small files in each day's and status's partition
# (1,053 files of 5.5 KB on average for 284 partitions after the soak's 90 days).
COMPACTED: Final = (REPLAY_LOG, APP_PROGRESS, ROOT_STATE)
# The first deltalake whose conflict checker lets a rewrite commit beside a concurrent
# append (tests/s3/test_maintenance.py fails on 1.0.0, passes on 1.1.4).
MERGES_BESIDE_APPENDS: Final = (1, 1)
# The first deltalake whose full VACUUM keeps the files younger than the retention: 1.0
# and 1.1 delete every file the log does not name, a running writer's uncommitted ones too.
FULL_VACUUM_KEEPS_YOUNG_FILES: Final = (1, 2)
# The steps of a maintenance run, in order, as its summary times them (`seconds_by_step`).
STEPS: Final = ("retention", "optimize", "vacuum", "logs")
# What wraps each step: `ackfold.maintenance.run` times it and says so (`Steps`).
Step = Callable[[str], AbstractContextManager[object]]


def no_steps(name: str) -> AbstractContextManager[object]:
    """A `Step` that does nothing around each step."""
    return nullcontext()


class StoreMaintenanceError(AckfoldError, RuntimeError):
    """A table cannot be maintained safely as it is (reader version above 1)."""


def maintain_on_store(
    settings: Settings, *, now: datetime | None = None, step: Step = no_steps
) -> dict[str, Any]:
    """Retention, compaction and VACUUM of the ledger under `settings.table_root` (an
    object store, or any warehouse on the embedded engine), in delta-rs. The caller holds
    the ledger's turn (`ackfold.maintenance.run_maintenance`); `step(name)` wraps each of
    `STEPS`."""
    started = time.monotonic()
    writer = object_store_writer(settings.table_root)
    writer.create()
    # Before anything is read: a maintenance run that lost the lease commits nothing
    # more to any table (its retention from an old read, its OPTIMIZE, its ALTER).
    held(settings.table_root, "maintenance").claim([writer.ledger.path(n) for n in TABLES])
    now = (now or datetime.now(UTC)).astimezone(UTC)
    cutoff = now - settings.maintenance.retention
    for name in TABLES:
        _check_reader_version(_table(writer, name), writer.uri(name))
    with step("retention"):
        since = retention_since(_table(writer, ROOT_STATE).metadata().configuration, cutoff)
        roots = settled_roots(writer, cutoff, since)
        deleted = _delete_events(writer, roots, cutoff) if roots.num_rows else 0
        _commit(
            writer,
            ROOT_STATE,
            lambda t, c: t.alter.set_table_properties(
                retention_marks(cutoff, since), raise_if_not_exists=False, commit_properties=c
            ),
            "retention's cut-off",
        )
        summary: dict[str, Any] = {
            "retention_cutoff": cutoff.isoformat(),
            "retention_since": since.isoformat() if since else None,
            "roots_expired": roots.num_rows,
            "events_deleted": deleted,
        }
        summary["reports_deleted"] = {
            name: _delete_older(writer, name, column, before)
            for name, column, before in report_cutoffs(settings, now)
        }
    with step("optimize"):
        for name in Z_ORDERED:
            properties = writer_properties(name)
            _commit(
                writer,
                name,
                lambda t, c, p=properties: t.optimize.z_order(
                    ["root_id"], writer_properties=p, commit_properties=c
                ),
                "Z-order",
            )
        for name in COMPACTED:
            properties = writer_properties(name)
            _commit(
                writer,
                name,
                lambda t, c, p=properties: t.optimize.compact(
                    writer_properties=p, commit_properties=c
                ),
                "compaction",
            )
    ledger = Ledger(settings.table_root)
    with step("vacuum"):
        kept = {name: vacuum_hours(settings, ledger, name) for name in TABLES}
        before = {name: _table(writer, name).version() for name in TABLES}
        for name, hours in kept.items():
            wanted = f"interval {hours} hours"
            table = _table(writer, name)
            if table.metadata().configuration.get(RETENTION_PROPERTY) != wanted:
                _commit(
                    writer, name,
                    lambda t, c, w=wanted: t.alter.set_table_properties(
                        {RETENTION_PROPERTY: w}, commit_properties=c
                    ),
                    "retention property",
                )  # fmt: skip
        full = full_vacuum()
        for name, hours in kept.items():
            _commit(writer, name, partial(_vacuum, hours=hours, full=full), "VACUUM")
        summary["removed"] = {
            name: vacuumed(ledger, name, before[name], table=writer.table(name)) for name in TABLES
        }
    with step("logs"):
        summary["logs_kept"] = tidy_logs(ledger, read=writer.table)
    for name in TABLES:
        _check_reader_version(_table(writer, name), writer.uri(name))
    summary["optimized"] = [*Z_ORDERED, *COMPACTED]
    summary["vacuumed"] = list(TABLES)
    summary["checkpointed"] = list(TABLES)
    summary["protocol"] = "delta-rs"
    summary["seconds"] = round(time.monotonic() - started, 1)
    log.info("maintenance (delta-rs): %s", summary)
    return summary


def removed_totals(removed: dict[str, dict[str, int]]) -> dict[str, int]:
    """A summary's `files_removed` and `bytes_removed`: the sums of `removed`, the `files`
    and `bytes` VACUUM deleted (or would delete) per table."""
    return {
        "files_removed": sum(figures["files"] for figures in removed.values()),
        "bytes_removed": sum(figures["bytes"] for figures in removed.values()),
    }


def report_cutoffs(settings: Settings, now: datetime) -> tuple[tuple[str, str, datetime], ...]:
    """The report tables retention deletes from, each with its time column and the
    cut-off before which its rows go at `now` (aware): `sent_messages` and
    `quality_results` at `maintenance.retention`, `app_progress` (the apps' heartbeats)
    at `maintenance.progress_retention`."""
    cutoff = now - settings.maintenance.retention
    beats = now - settings.maintenance.progress_retention
    return (
        (SENT_MESSAGES, "sent_at", cutoff),
        (QUALITY_RESULTS, "run_at", cutoff),
        (APP_PROGRESS, "recorded_at", beats),
    )


def vacuum_hours(settings: Settings, ledger: Ledger, name: str) -> int:
    """The hours of unreferenced files VACUUM keeps in table `name`:
    `maintenance.vacuum_retention`, or for `ack_events` more, back to the first commit no
    reconcile has folded yet (VACUUM reads the wall clock, and so does this)."""
    hours = round(settings.maintenance.vacuum_retention.total_seconds() / 3600)
    first, at = (unfolded_since(ledger) if name == ACK_EVENTS else None) or (0, None)
    if at is None:
        return hours
    needed = math.ceil((datetime.now(UTC) - at) / timedelta(hours=1)) + 1
    if needed <= hours:
        return hours
    log.info(
        "maintenance: VACUUM of %s keeps %d hours of files, not %d: version %d (committed "
        "%s) and later are not folded by a reconcile yet, and their files stay until one has",
        ledger.path(name), needed, hours, first, at.isoformat(timespec="seconds"),
    )  # fmt: skip
    return needed


def _table(writer: Any, name: str) -> Any:
    """Table `name` at its latest version: the writer's, kept across the run's commits and
    refreshed (`ackfold.ledger.storage.snapshots`), not opened again for each."""
    return writer.table(name)


def _commit(writer: Any, name: str, action: Any, what: str) -> Any:
    """`action(table, commit_properties)` on a fresh snapshot of `name`, retried on a
    conflict, fenced by the run's lease (`ackfold.ledger.commits.fence.commit`): the properties
    carry its epoch, and a run that lost the lease commits nothing."""
    try:
        return fence_commit(
            writer.ledger.root,
            writer.ledger.path(name),
            action,
            what=f"{what} of {writer.uri(name)}",
            load=lambda: _table(writer, name),
        )
    except LedgerConflict as exc:
        if _deltalake_at_least(MERGES_BESIDE_APPENDS):
            raise
        found = version("deltalake")
        # deltalake 1.0 refuses a rewrite when an append landed meanwhile, where 1.1 and
        # later see that the two touch different files: with apps appending all the time,
        # every try loses.
        raise LedgerConflict(
            f"{exc}. deltalake {found} refuses a rewrite whenever an app appended "
            "meanwhile (deltalake 1.1 and later commit both): upgrade "
            "deltalake, or run maintenance while no app writes"
        ) from exc


def _deltalake_at_least(minimum: tuple[int, int]) -> bool:
    found = version("deltalake")
    return tuple(int(part) for part in re.findall(r"\d+", found)[:2]) >= minimum


def full_vacuum() -> bool:
    """Whether VACUUM lists the table's files and deletes every one no version names once
    it is older than the retention, as Delta Spark's VACUUM does; delta-rs's default
    ("lite") deletes only the files whose removal the log still records. A checkpoint
    drops removals older than `delta.deletedFileRetentionDuration`, so with lite alone the
    files of a maintenance run skipped for longer than that, and those a killed writer
    left, stay on the store for ever (a year of the soak: 5,910 files in `root_state` for
    1,111 live). Full costs a listing of the table's files, as Spark's does."""
    if _deltalake_at_least(FULL_VACUUM_KEEPS_YOUNG_FILES):
        return True
    log.warning(
        "maintenance: deltalake %s's full VACUUM would delete files younger than the "
        "retention, a running writer's among them (1.2 keeps them): VACUUM deletes only the "
        "files the log still records as removed, and files a killed writer left, or removed "
        "longer ago than the log keeps, stay on the store; upgrade deltalake to delete them",
        version("deltalake"),
    )
    return False


def _vacuum(table: Any, properties: Any, *, hours: int, full: bool) -> list[str]:
    removed: list[str] = table.vacuum(
        retention_hours=hours, dry_run=False, commit_properties=properties, full=full
    )
    return removed


def settled_roots(writer: Any, cutoff: datetime, since: datetime | None = None) -> Any:
    """The ids of the roots settled before `cutoff` (an Arrow table of `root_id`); with
    `since`, only those whose status changed, or whose last event came, at or after it,
    read from only the files that may hold one (`ackfold.ledger.housekeeping.retention`)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    table = _table(writer, ROOT_STATE)
    wanted = (
        (ds.field("first_event_date") < cutoff.date())  # prunes partitions
        & ds.field("status").isin(list(SETTLED))
        & (ds.field("status_changed_at") < cutoff)
        & (ds.field("last_event_at") < cutoff)
    )
    keep = None
    if since is not None:
        changed = [ds.field(column) >= since for column in CHANGED]
        wanted &= changed[0] | changed[1]

        def keep(action: Mapping[str, Any]) -> bool:
            settled = action.get("partition.status") in SETTLED
            return settled and changed_file(action, since)

    dataset = plain_dataset(table, writer.uri(ROOT_STATE), keep)
    found = dataset.to_table(columns=["root_id"], filter=wanted).group_by("root_id").aggregate([])
    return found.filter(pc.is_valid(found["root_id"]))


def _delete_events(writer: Any, roots: Any, cutoff: datetime) -> int:
    """Delete the events of `roots` older than `cutoff` from `ack_events`: the count."""
    moment = _timestamp(cutoff)

    def merge(table: Any, properties: Any) -> Any:
        return (
            table.merge(
                roots,
                predicate=f"t.root_id = s.root_id AND t.event_time < {moment}",
                source_alias="s",
                target_alias="t",
                writer_properties=writer_properties(ACK_EVENTS),
                commit_properties=properties,
            )
            .when_matched_delete()
            .execute()
        )

    metrics = _commit(writer, ACK_EVENTS, merge, "retention MERGE")
    return int(metrics.get("num_target_rows_deleted", 0))


def _delete_older(writer: Any, name: str, column: str, cutoff: datetime) -> int:
    predicate = f"{column} < {_timestamp(cutoff)}"
    properties = writer_properties(name)

    def delete(table: Any, commit: Any) -> Any:
        return table.delete(predicate, writer_properties=properties, commit_properties=commit)

    metrics = _commit(writer, name, delete, "retention DELETE")
    return int(metrics.get("num_deleted_rows", 0))


def _timestamp(moment: datetime) -> str:
    """A UTC timestamp literal for delta-rs's SQL (DataFusion), from a datetime: a string
    that DataFusion coerces to the column's type (a `::timestamp` cast has no time zone,
    and comparing it with a UTC column is an error)."""
    return f"'{moment.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}'"


def _check_reader_version(table: Any, path: str) -> None:
    if table.protocol().min_reader_version != 1:
        raise StoreMaintenanceError(
            f"{path} has reader version {table.protocol().min_reader_version}: ackfold needs "
            "reader version 1 for delta-rs (no deletion vectors, no column mapping)"
        )
