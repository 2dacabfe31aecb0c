"""A reconcile with nothing to do, answered in delta-rs before any engine starts.

Most scheduled reconciles find nothing: no event since the last run, and no open root
whose timeout has come. Such a run writes no row, yet starting Spark for it costs a JVM
(classic) or a round of jobs on the server (Connect). So a reconcile first reads, with
delta-rs and no JVM:

1. the mark of what runs of its scope have folded, in `root_state`
   (`ackfold.ledger.commits.marks`): the id and version of `ack_events` folded up to;
2. `ack_events` now: the same table at the same version means no event since;
3. the state of the roots the reconciler keeps open, each classified again at `now` by
   the reference classification (`ackfold.reconcile.fold.classify`), with the policy of
   its app: the same status for every one means no timeout fires.

When all three hold, an engine's run would fold nothing and change no row, so its
summary is read from `root_state` and `unmatched_events` as they stand. When any fails,
the engine runs.

Why the mark is sound. A run commits the mark after the state it describes, with the
version of `ack_events` whose files it read: every event up to that version is folded.
A commit since (an append, or maintenance removing rows) moves the version, and the next
run is an engine's run, once. A table made anew at the same path has another id. Events
waiting for their root in `unmatched_events` are retried with the next new events.
"""

from __future__ import annotations

import logging
from dataclasses import fields
from datetime import date, datetime
from typing import Any, Final

from ackfold.config import Settings
from ackfold.ledger.commits.marks import events_table, read_mark
from ackfold.ledger.errors import LedgerError
from ackfold.ledger.reading.sql import SqlReader, first_line, sql_str
from ackfold.ledger.schema.tables import ROOT_STATE, UNMATCHED_EVENTS, Ledger, rows_by_partition
from ackfold.reconcile.fold import RootFold, classify
from ackfold.reconcile.state import open_partitions_sql

log = logging.getLogger("ackfold.reconcile")

# What a run counts, all zero when it found nothing new.
COUNTERS: Final = ("events_read", "events_folded", "duplicates_dropped", "roots_updated")
# What the classification of a root reads: its folded state (its event ids are not kept).
_FOLD_COLUMNS: Final = tuple(f.name for f in fields(RootFold) if f.name != "seen_event_ids")


def nothing_new(settings: Settings, app: str | None) -> int | None:
    """The version of `ack_events` that runs of `app` have folded, if nothing was
    committed to it since; else None (or None where it cannot be read here)."""
    ledger = Ledger(settings.table_root)
    try:
        table = events_table(ledger)
        events_id, version = str(table.metadata().id), int(table.version())
        mark = read_mark(ledger, app, events_id)
    except Exception as exc:  # unreadable here: the engine's run decides
        log.debug("reconcile: no mark read (%s): the engine runs", first_line(exc))
        return None
    return version if mark == version else None


def summary(
    app: str | None,
    now: datetime,
    counts: dict[str, int],
    unmatched: int,
    by_status: dict[str, int],
) -> dict[str, Any]:
    """A reconcile's summary, as `ackfold reconcile` prints it."""
    return {
        "app": app,
        "now": now.isoformat(),
        **counts,
        "unmatched_events": unmatched,
        "by_status": dict(sorted(by_status.items())),
    }


def quiet_summary(
    settings: Settings, *, now: datetime, since: date, app: str | None
) -> dict[str, Any] | None:
    """The summary of a reconcile at `now` that would change nothing, read without an
    engine; None if it may change something, or cannot be told here. `since`: the first
    day of the window whose superseded roots are kept open."""
    folded = nothing_new(settings, app)
    if folded is None:
        return None
    reader = SqlReader(settings.table_root)
    mine = [] if app is None else [f"app = {sql_str(app)}"]
    try:
        open_roots = reader.query(
            ROOT_STATE,
            ["status", *_FOLD_COLUMNS],
            [*mine, open_partitions_sql(since)],
            required=True,
        )
        if any(_status_at(row, settings, now) != row["status"] for row in open_roots):
            return None  # a timeout fires (or a policy changed): the Spark run writes it
        unmatched, by_status = counted(settings, app)
    except Exception as exc:  # whatever it is, the Spark run is never wrong to go on
        level = logging.DEBUG if isinstance(exc, LedgerError) else logging.WARNING
        log.log(level, "reconcile: no quick answer (%s): Spark runs", first_line(exc))
        return None
    log.info(
        "reconcile (app=%s): nothing new since ack_events version %d and no timeout due: "
        "nothing to write, so no Spark job ran",
        app or "*", folded,
    )  # fmt: skip
    return summary(app, now, dict.fromkeys(COUNTERS, 0), unmatched, by_status)


def counted(settings: Settings, app: str | None) -> tuple[int, dict[str, int]]:
    """The events waiting for their root and the roots by status, of `app` (None: all),
    read with delta-rs: what a summary reports after a run, or for a quiet one."""
    reader = SqlReader(settings.table_root)
    mine = [] if app is None else [f"app = {sql_str(app)}"]
    state = reader.table(ROOT_STATE, required=True)
    # All apps: the log's row counts per status partition, no row read (issue 55).
    by_status = None if app else rows_by_partition(state, "status")
    if by_status is None:
        rows = reader.query(
            ROOT_STATE, ["status", "count(*) AS n"], mine, group="status", required=True
        )
        by_status = {row["status"]: int(row["n"]) for row in rows}
    waiting = reader.query(UNMATCHED_EVENTS, ["count(*) AS n"], mine)
    return int(waiting[0]["n"]) if waiting else 0, by_status


def _status_at(row: dict[str, Any], settings: Settings, now: datetime) -> str:
    """The status the reconcile would give the open root `row` at `now`, with no new event."""
    policy = settings.app(row["app"])
    fold = RootFold(**{k: row[k] for k in _FOLD_COLUMNS})
    return classify(
        fold,
        now=now,
        timeout=policy.timeout,
        idle_timeout=policy.idle_timeout,
        prior_status=row["status"],
    )
