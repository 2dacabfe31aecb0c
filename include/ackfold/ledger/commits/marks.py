"""The mark of what a reconcile has folded, and the events new since: one record for both
engines, committed with the state it describes.

The mark is a Delta application transaction (`txn`) in `root_state`: app id
`ackfold.reconcile/<scope>/<id of ack_events>`, version the last `ack_events` version
folded (`scope`: `all`, or `app=<name>` for a run of one app). It is committed by the
run that holds the ledger's lease, after the state it describes, in a commit of
`root_state` that carries the lease's epoch too (`ackfold.ledger.commits.fence`), so:

- it is where the state is, on every store, read and written the same way by both
  engines: a ledger folded by one is folded next by the other from the same place;
- it only moves forward: a commit that would move it back is not made, and a concurrent
  commit of the same mark fails Delta's conflict check (it names the same app id);
- a run that lost its lease cannot move it;
- a run killed between its writes and its mark leaves the mark behind its state: the next
  run folds those events again, which changes nothing (each open root keeps the hashes of
  the events it folded; a settled root ignores them).

A table made anew at the same path has another id, hence no mark. A ledger reconciled by
an earlier ackfold has no mark yet: its last one is read from where that ackfold kept it
(`LEGACY_MARK` in the run's checkpoint directory, else the last batch Spark's stream
committed there), and the run's first mark is then committed here.

What a run reads after the mark is `ackfold.reconcile.new_events`; what maintenance must
keep for it, `unfolded_since`.

Example:
    >>> import tempfile
    >>> from ackfold.ledger.commits.lease import LedgerLease
    >>> from ackfold.ledger.commits.fence import holding
    >>> from ackfold.ledger.commits.writer import LedgerWriter
    >>> ledger = Ledger(tempfile.mkdtemp())
    >>> _ = LedgerWriter(ledger.root).create()
    >>> events_id = str(events_table(ledger).metadata().id)
    >>> with LedgerLease(ledger.root).held("doctest") as fence, holding(fence):
    ...     commit_mark(ledger, None, events_id, 0)
    >>> read_mark(ledger, None, events_id), read_mark(ledger, "orders", events_id)
    (0, None)
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Final

from ackfold.config.values import APP_NAME
from ackfold.ledger.commits.fence import commit as fence_commit
from ackfold.ledger.commits.fence_tables import commit_nothing
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, Ledger, local_dir
from ackfold.ledger.storage.run_store import options_for
from ackfold.ledger.storage.snapshots import run_table
from ackfold.ledger.storage.store import delta_uri, file_system

log = logging.getLogger("ackfold.ledger.commits.marks")

CHECKPOINTS: Final = "_checkpoints"
# Where an earlier ackfold kept its mark, in the run's checkpoint directory.
LEGACY_MARK: Final = "ackfold-read-up-to.json"


def check_app_name(app: str) -> str:
    """`app`, if it is a plain name: it becomes part of the mark's app id and of a path."""
    if not APP_NAME.match(app):
        raise ValueError(f"app {app!r} is not an app name: use letters, digits, '.', '_', '-'")
    return app


def scope(app: str | None) -> str:
    """What a run folds: every app (`all`), or one (`app=<name>`)."""
    return f"app={app}" if app else "all"


def mark_app(app: str | None, events_id: str) -> str:
    """The app id of the mark of a run of `app` (None: every app) over the `ack_events`
    table whose id is `events_id`.

    Example:
        >>> mark_app("orders", "3f0c")
        'ackfold.reconcile/app=orders/3f0c'
    """
    return f"ackfold.reconcile/{scope(app)}/{events_id}"


def reconcile_checkpoint(ledger: Ledger, app: str | None) -> str:
    """The checkpoint directory an earlier ackfold kept for a run of `app`."""
    return ledger.path(f"{CHECKPOINTS}/reconcile/{scope(app)}")


def events_table(ledger: Ledger) -> Any:
    """`ack_events` as delta-rs reads it here, at its latest version (in a run, the run's
    kept snapshot of it, refreshed: `ackfold.ledger.storage.snapshots.run_table`)."""
    path = ledger.path(ACK_EVENTS)
    return run_table(path, options_for(path))


def read_mark(ledger: Ledger, app: str | None, events_id: str) -> int | None:
    """The last `ack_events` version (of the table `events_id`) that runs of `app` have
    folded; None if none (or an older ackfold's record of another table). Read from
    `root_state`'s latest version (in a run, its kept snapshot, refreshed)."""
    path = ledger.path(ROOT_STATE)
    try:
        state = run_table(path, options_for(path))
    except Exception:  # no root_state yet: nothing was ever folded
        return None
    version = state.transaction_version(mark_app(app, events_id))
    if version is not None:
        return int(version)
    return legacy_mark(ledger, app, events_id)


def commit_mark(ledger: Ledger, app: str | None, events_id: str, version: int) -> None:
    """Say in `root_state` that runs of `app` have folded `ack_events` up to `version`:
    one commit with the mark's transaction and the lease's epoch (`ackfold.ledger.commits.fence`);
    none if the mark is there already or further on."""
    from deltalake import Transaction

    path = ledger.path(ROOT_STATE)
    app_id = mark_app(app, events_id)

    def commit(table: Any, properties: Any) -> None:
        held = table.transaction_version(app_id)
        if held is not None and int(held) >= version:
            log.debug("reconcile: %s is at %d already, not %d", app_id, held, version)
            return
        commit_nothing(table, properties)

    fence_commit(
        ledger.root, path, commit, what=f"mark {app_id} = {version} in {path}",
        also=[Transaction(app_id, version)],
    )  # fmt: skip


# -- what an earlier ackfold left ------------------------------------------------------


def legacy_mark(ledger: Ledger, app: str | None, events_id: str) -> int | None:
    """The last version an earlier ackfold's runs of `app` folded: its mark file in the
    checkpoint directory, else the end of the last batch Spark's stream committed there;
    None if neither names the `ack_events` table `events_id`."""
    checkpoint = reconcile_checkpoint(ledger, app)
    store = _store(checkpoint)
    if store is None:
        return None
    found = _mark_file(store, events_id)
    if found is None:
        found = _stream_offset(store, events_id)
    if found is not None:
        log.info(
            "reconcile (%s): carrying on from an earlier ackfold's mark in %s: version %d",
            scope(app), checkpoint, found,
        )  # fmt: skip
    return found


def _store(location: str) -> Any:
    """The files under `location` as an Arrow file system (delta-rs's, with the ledger's
    storage options); None if it cannot be reached."""
    import pyarrow.fs as pafs

    local = local_dir(location)
    if local is not None and not local.is_dir():
        return None  # (deltalake 1.0's handler would make the directory)
    try:
        return pafs.PyFileSystem(file_system(delta_uri(location), options_for(location)))
    except Exception as exc:
        log.debug("reconcile: %s cannot be read (%s)", location, exc)
        return None


def _read_text(store: Any, name: str) -> str | None:
    try:
        with store.open_input_stream(name) as handle:
            return bytes(handle.read()).decode("utf-8")
    except (FileNotFoundError, OSError):
        return None


def _mark_file(store: Any, events_id: str) -> int | None:
    """The version in an earlier ackfold's mark file, if it names `events_id`."""
    text = _read_text(store, LEGACY_MARK)
    try:
        mark = json.loads(text) if text else None
        if mark and mark.get("ack_events_id") == events_id:
            return int(mark["ack_events_version"])
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def _stream_offset(store: Any, events_id: str) -> int | None:
    """The last version that Spark's stream (Delta's streaming source) had read whole at
    its last committed batch, if it read `events_id`. Its end offset (`reservoirVersion`,
    `index`) means every version before `reservoirVersion` was read, and that version
    up to `index`: the version before is the mark (the partial one is folded again,
    which changes nothing). An offset in the table's first snapshot says no version."""
    import pyarrow.fs as pafs

    committed = [
        int(info.base_name)
        for info in store.get_file_info(pafs.FileSelector("commits", allow_not_found=True))
        if info.base_name.isdigit()
    ]
    if not committed:
        return None
    text = _read_text(store, f"offsets/{max(committed)}")
    if not text:
        return None
    try:
        offset = json.loads(text.strip().splitlines()[-1])
        if offset.get("reservoirId") != events_id or offset.get("isStartingVersion"):
            return None
        version = int(offset["reservoirVersion"]) - 1
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    return version if version >= 0 else None


# -- what maintenance must keep ----------------------------------------------------------


def unfolded_since(ledger: Ledger) -> tuple[int, datetime | None] | None:
    """The first version of `ack_events` after the mark of the runs of every app, and when
    it was committed (None if its commit file is gone); None when there is nothing after
    the mark, or no mark at all (the next run reads the table as it is, whole).

    What maintenance keeps for the next reconcile: the files that version and the later
    ones added (VACUUM), and their commit files (log cleanup). A run of one app
    (`--app`) whose mark is older reads what is gone as the whole table, loudly."""
    table = events_table(ledger)
    mark = read_mark(ledger, None, str(table.metadata().id))
    if mark is None or mark >= table.version():
        return None
    first = mark + 1
    store = _store(ledger.path(ACK_EVENTS))
    text = _read_text(store, f"_delta_log/{first:020d}.json") if store is not None else None
    for line in (text or "").splitlines():
        info = json.loads(line).get("commitInfo") if line.strip() else None
        if info and "timestamp" in info:
            return first, datetime.fromtimestamp(int(info["timestamp"]) / 1000, UTC)
    return first, None
