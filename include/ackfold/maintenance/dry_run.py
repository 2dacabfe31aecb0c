"""What a maintenance run would do now, read and not done (`ackfold maintain --dry-run`).

It reads the ledger with delta-rs, whatever the engine (it commits nothing, so it needs
neither the ledger's turn nor a JVM), and answers with the keys of a run's summary:

- retention: the settled roots it would expire (those changed since the last run's
  cut-off, or all on a full pass: `ackfold.ledger.housekeeping.retention`), their events
  older than the cut-off, and the report rows (`sent_messages`, `quality_results`,
  `app_progress`) it would delete;
- optimize: the tables it would Z-order or compact (all of `Z_ORDERED` and `COMPACTED`);
- vacuum: the files, and their bytes, VACUUM would delete from each table now, with the
  retention it would keep (`vacuum_hours`). The files that this run's own retention and
  compaction would replace are not among them: they are kept `maintenance.
  vacuum_retention` after the run, and a later run deletes them.

Example:
    >>> plan_maintenance(settings)["roots_expired"]        # doctest: +SKIP
    3
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ackfold.config import Settings
from ackfold.ledger.commits.driver_writers import object_store_writer
from ackfold.ledger.housekeeping.retention import retention_since
from ackfold.ledger.housekeeping.store_maintenance import (
    COMPACTED,
    Z_ORDERED,
    full_vacuum,
    removed_totals,
    report_cutoffs,
    settled_roots,
    vacuum_hours,
)
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ROOT_STATE,
    TABLES,
    Ledger,
)
from ackfold.ledger.storage.run_store import options_for
from ackfold.ledger.storage.store import delta_uri


def plan_maintenance(settings: Settings, *, now: datetime | None = None) -> dict[str, Any]:
    """What `run_maintenance` would delete and rewrite at `now`, with nothing committed.
    Raises `NoLedger` if there is no ledger yet."""
    import pyarrow.dataset as ds

    from ackfold.ledger.errors import NoLedger

    now = (now or datetime.now(UTC)).astimezone(UTC)
    ledger = Ledger(settings.table_root)
    writer = object_store_writer(settings.table_root)
    tables = {name: _table(ledger, name) for name in TABLES}
    if tables[ACK_EVENTS] is None:
        raise NoLedger(
            f"no ledger under {settings.table_root} yet: nothing to maintain (check "
            "`warehouse` in the settings, or run an app first)"
        )
    cutoff = now - settings.maintenance.retention
    roots = None
    if tables[ROOT_STATE] is not None:
        since = retention_since(tables[ROOT_STATE].metadata().configuration, cutoff)
        roots = settled_roots(writer, cutoff, since)
    expired = roots.num_rows if roots is not None else 0
    events = 0
    if roots is not None and expired:
        events = (
            tables[ACK_EVENTS]
            .to_pyarrow_dataset()
            .count_rows(
                filter=ds.field("root_id").isin(roots["root_id"])
                & (ds.field("event_time") < cutoff)
            )
        )
    reports = {
        name: _older(tables[name], column, before)
        for name, column, before in report_cutoffs(settings, now)
    }
    full = full_vacuum()
    removed = {
        name: _vacuumable(table, vacuum_hours(settings, ledger, name), full=full)
        for name, table in tables.items()
    }
    return {
        "dry_run": True,
        "retention_cutoff": cutoff.isoformat(),
        "roots_expired": expired,
        "events_deleted": events,
        "reports_deleted": reports,
        "optimized": [name for name in (*Z_ORDERED, *COMPACTED) if tables[name] is not None],
        "vacuumed": [name for name, table in tables.items() if table is not None],
        "removed": removed,
        **removed_totals(removed),
    }


def _table(ledger: Ledger, name: str) -> Any:
    from deltalake import DeltaTable

    path = ledger.path(name)
    options = options_for(path)
    if not DeltaTable.is_deltatable(delta_uri(path), storage_options=options):
        return None
    return DeltaTable(delta_uri(path), storage_options=options)


def _older(table: Any, column: str, before: datetime) -> int:
    import pyarrow.dataset as ds

    if table is None:
        return 0
    return int(table.to_pyarrow_dataset().count_rows(filter=ds.field(column) < before))


def _vacuumable(table: Any, hours: int, *, full: bool) -> dict[str, int]:
    """The files (and their bytes) VACUUM keeping `hours` (`full`, or lite: `full_vacuum`)
    would delete from `table` now."""
    if table is None:
        return {"files": 0, "bytes": 0}
    # Not enforced: a run sets the table's retention to `hours` before its VACUUM.
    files = table.vacuum(
        retention_hours=hours, dry_run=True, enforce_retention_duration=False, full=full
    )
    if not files:
        return {"files": 0, "bytes": 0}
    found = table.to_pyarrow_dataset().filesystem.get_file_info(files)
    return {"files": len(files), "bytes": sum(max(0, info.size or 0) for info in found)}
