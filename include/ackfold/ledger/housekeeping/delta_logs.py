"""Delta's logs, for maintenance on both engines: what the VACUUMs of a table deleted,
as its log records them (`vacuumed`), and each table checkpointed and its old log files
cleaned up (`tidy_logs`), but never `ack_events`' commits that no reconcile has folded
yet (`ackfold.ledger.commits.marks.unfolded_since`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from ackfold.ledger.commits.fence import held
from ackfold.ledger.commits.marks import unfolded_since
from ackfold.ledger.schema.tables import ACK_EVENTS, TABLES, Ledger
from ackfold.ledger.storage.run_store import options_for
from ackfold.ledger.storage.store import delta_uri

log = logging.getLogger("ackfold.maintenance")  # as the rest of maintenance: one name to follow

LOG_RETENTION_PROPERTY: Final = "delta.logRetentionDuration"
DEFAULT_LOG_RETENTION: Final = timedelta(days=30)
UNITS: Final = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}


def vacuumed(ledger: Ledger, name: str, since: int, *, table: Any = None) -> dict[str, int]:
    """What the VACUUMs of table `name` after version `since` deleted: `files` and
    `bytes`, from the metrics of their `VACUUM START` commits, which delta-rs and Delta
    Spark (with `spark.databricks.delta.vacuum.logging.enabled`) both write. `table`: the
    table at its latest version, if the caller has it (else it is opened)."""
    from deltalake import DeltaTable

    path = ledger.path(name)
    if table is None:
        table = DeltaTable(delta_uri(path), storage_options=options_for(path))
    files = size = 0
    for entry in table.history(max(1, table.version() - since)):
        if entry.get("version", since + 1) <= since or entry.get("operation") != "VACUUM START":
            continue
        metrics = entry.get("operationMetrics") or {}
        files += int(metrics.get("numFilesToDelete") or 0)
        size += int(metrics.get("sizeOfDataToDelete") or 0)
    return {"files": files, "bytes": size}


def tidy_logs(
    ledger: Ledger,
    tables: tuple[str, ...] = tuple(TABLES),
    *,
    read: Callable[[str], Any] | None = None,
) -> list[str]:
    """Checkpoint each of `tables`, then delete its log files older than its
    `delta.logRetentionDuration` (delta-rs's `cleanup_metadata`); `ack_events`' are kept
    while a commit no reconcile has folded yet would go with them. The tables whose logs
    were kept whole. `read(name)`: a table at its latest version (a writer's kept one, by
    default opened)."""
    from deltalake import DeltaTable

    # Not commits, but changes all the same (invariant 19): only by the lease's holder.
    held(ledger.root, "log cleanup").check("the ledger's logs (no cleanup)")
    kept = []
    for name in tables:
        path = ledger.path(name)
        if read is not None:
            table = read(name)
        else:
            table = DeltaTable(delta_uri(path), storage_options=options_for(path))
        table.create_checkpoint()
        first, at = (unfolded_since(ledger) if name == ACK_EVENTS else None) or (0, None)
        retention = log_retention(table.metadata().configuration)
        if at is not None and at < datetime.now(UTC) - retention:
            log.info(
                "maintenance: the log of %s is kept whole: version %d (committed %s) is "
                "older than its log retention and not folded by a reconcile yet",
                path, first, at.isoformat(timespec="seconds"),
            )  # fmt: skip
            kept.append(name)
            continue
        table.cleanup_metadata()
    return kept


def log_retention(configuration: dict[str, str]) -> timedelta:
    """A table's `delta.logRetentionDuration` (Delta's 30 days when unset).

    Example:
        >>> log_retention({"delta.logRetentionDuration": "interval 7 days"})
        datetime.timedelta(days=7)
        >>> log_retention({})
        datetime.timedelta(days=30)
    """
    text = configuration.get(LOG_RETENTION_PROPERTY)
    return interval(text) if text else DEFAULT_LOG_RETENTION


def interval(text: str) -> timedelta:
    """A Delta interval property's duration: ``"interval 2 hours"``, ``"7 days"``.

    Example:
        >>> interval("INTERVAL 1 week")
        datetime.timedelta(days=7)
    """
    words = text.lower().split()
    count, unit = (words[1], words[2]) if words[0] == "interval" else (words[0], words[1])
    return timedelta(seconds=float(count) * UNITS[unit.rstrip("s")])
