"""A reconcile with nothing to do, answered in delta-rs before Spark starts.

Most scheduled reconciles find nothing: no event since the last run, and no open root
whose timeout has come. Such a run writes no row, yet starting Spark for it costs a JVM
(classic) or a round of jobs on the server (Connect). So a reconcile first reads, with
delta-rs and no JVM:

1. the mark its last whole run left in its checkpoint: the id and version that
   `ack_events` had when that run's stream started (`save_mark`);
2. `ack_events` now: the same table at the same version means no event since;
3. the state of the roots the reconciler keeps open, each classified again at `now` by
   the reference classification (`ackfold.reconcile.fold.classify`), with the policy of
   its app: the same status for every one means no timeout fires.

When all three hold, the Spark run would fold nothing and change no row, so its summary
is read from `root_state` and `unmatched_events` as they stand. When any fails, or the
warehouse is not a directory this process can read and write, the Spark run goes on.

Why the mark is sound. `availableNow` reads everything committed before its query
starts, so a run that read version V before it started its stream, and ended without an
error, has folded every event up to V. A commit since (an append, or maintenance
removing rows) moves the version, and the next run is a Spark run. A table made anew at
the same path has another id. A removed checkpoint takes its mark with it. Events
waiting for their root in `unmatched_events` are retried with the next new events, in a
Spark run as here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import fields
from datetime import date, datetime
from typing import Any, Final

from ackfold.config import Settings
from ackfold.ledger.errors import LedgerError
from ackfold.ledger.sql import SqlReader, first_line, sql_str
from ackfold.ledger.store import (
    delta_uri,
    object_store_of,
    s3_client,
    split_location,
    storage_options,
    store_kind,
)
from ackfold.ledger.tables import ACK_EVENTS, ROOT_STATE, UNMATCHED_EVENTS, Ledger, local_dir
from ackfold.reconcile.fold import RootFold, classify
from ackfold.reconcile.state import open_partitions_sql

log = logging.getLogger("ackfold.reconcile")

MARK: Final = "ackfold-read-up-to.json"
# Raised when what a Spark run does before its stream (the tables' layout) changes: a
# mark of an older ackfold then sends the next run to Spark, which brings the layout up.
MARK_FORMAT: Final = 1
# What a run counts, all zero when it found nothing new.
COUNTERS: Final = ("events_read", "events_folded", "duplicates_dropped", "roots_updated")
# What the classification of a root reads: its folded state (its event ids are not kept).
_FOLD_COLUMNS: Final = tuple(f.name for f in fields(RootFold) if f.name != "seen_event_ids")


def table_version(path: str) -> tuple[str, int] | None:
    """(id, version) of the Delta table at `path`, read by delta-rs; None where this
    process cannot read it."""
    if local_dir(path) is None:
        return None
    from deltalake import DeltaTable

    try:
        table = DeltaTable(path)
        return str(table.metadata().id), int(table.version())
    except Exception as exc:  # unreadable here: the Spark run decides
        log.debug("reconcile: %s is not readable here (%s)", path, exc)
        return None


def save_mark(checkpoint: str, read: tuple[str, int]) -> None:
    """Say in `checkpoint` that its stream has folded `ack_events` (id, version) `read`."""
    table_id, version = read
    mark = {"format": MARK_FORMAT, "ack_events_id": table_id, "ack_events_version": version}
    directory = local_dir(checkpoint)
    if directory is None:
        _put_remote(checkpoint, json.dumps(mark).encode())
        return
    if not directory.is_dir():
        return
    staged = directory / f".{MARK}.{os.getpid()}"
    try:
        staged.write_text(json.dumps(mark))
        staged.replace(directory / MARK)  # atomic: a reader sees the old mark or the new one
    except OSError as exc:  # the run itself succeeded: only the next quiet check is lost
        with contextlib.suppress(OSError):
            staged.unlink(missing_ok=True)
        log.warning(
            "reconcile: could not mark %s (%s): the next run will start Spark", directory, exc
        )


def read_mark(checkpoint: str) -> tuple[str, int] | None:
    """What `save_mark` last said in `checkpoint`; None if nothing (or nothing legible)."""
    directory = local_dir(checkpoint)
    try:
        text = _get_remote(checkpoint) if directory is None else (directory / MARK).read_text()
        if text is None:
            return None
        mark = json.loads(text)
        if mark.get("format") != MARK_FORMAT:  # another ackfold's mark: Spark decides
            return None
        return str(mark["ack_events_id"]), int(mark["ack_events_version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _put_remote(checkpoint: str, data: bytes) -> None:
    """The mark on an object store: one PUT, which a reader sees whole or not at all."""
    try:
        if store_kind(checkpoint) == "s3":
            client, bucket, key = _s3_mark(checkpoint)
            client.put_object(Bucket=bucket, Key=key, Body=data)
            return
        import obstore

        store, key = _other_store(checkpoint)
        obstore.put(store, key, data)
    except Exception as exc:  # the run itself succeeded: only the next run's head start
        log.warning("reconcile: could not mark %s (%s)", checkpoint, first_line(exc))


def _get_remote(checkpoint: str) -> str | None:
    if store_kind(checkpoint) == "s3":
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            client, bucket, key = _s3_mark(checkpoint)
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            return bytes(body).decode("utf-8")
        except (ClientError, BotoCoreError):  # none yet, or none this process can read
            return None
    import obstore
    from obstore.exceptions import BaseError

    try:
        store, key = _other_store(checkpoint)
        return bytes(obstore.get(store, key).bytes()).decode("utf-8")
    except (BaseError, OSError):  # none yet, or none this process can read
        return None


def _s3_mark(checkpoint: str) -> tuple[Any, str, str]:
    """The S3 client of the ledger's storage options (the tables' endpoint and
    credentials, `ackfold.ledger.store`), and the mark's bucket and key."""
    bucket, _, prefix = delta_uri(checkpoint).removeprefix("s3://").partition("/")
    key = f"{prefix.strip('/')}/{MARK}".lstrip("/")
    return s3_client(storage_options(checkpoint) or {}), bucket, key


def _other_store(checkpoint: str) -> tuple[Any, str]:
    """The object store of a GCS or ADLS `checkpoint` (delta-rs's, with the ledger's
    storage options: `ackfold.ledger.store`), and the mark's key in it."""
    _, prefix = split_location(checkpoint)
    store = object_store_of(checkpoint, storage_options(checkpoint))
    return store, f"{prefix}/{MARK}".lstrip("/")


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
    settings: Settings, *, checkpoint: str, now: datetime, since: date, app: str | None
) -> dict[str, Any] | None:
    """The summary of a reconcile at `now` that would change nothing, read without Spark;
    None if it may change something, or cannot be told here. `since`: the first day of
    the window whose superseded roots are kept open."""
    mark = read_mark(checkpoint)
    if mark is None or table_version(Ledger(settings.table_root).path(ACK_EVENTS)) != mark:
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
        counted = reader.query(
            ROOT_STATE, ["status", "count(*) AS n"], mine, group="status", required=True
        )
        waiting = reader.query(UNMATCHED_EVENTS, ["count(*) AS n"], mine)
    except Exception as exc:  # whatever it is, the Spark run is never wrong to go on
        level = logging.DEBUG if isinstance(exc, LedgerError) else logging.WARNING
        log.log(level, "reconcile: no quick answer (%s): Spark runs", first_line(exc))
        return None
    log.info(
        "reconcile (app=%s): nothing new since ack_events version %d and no timeout due: "
        "nothing to write, so no Spark job ran",
        app or "*", mark[1],
    )  # fmt: skip
    return summary(
        app,
        now,
        dict.fromkeys(COUNTERS, 0),
        int(waiting[0]["n"]) if waiting else 0,
        {row["status"]: int(row["n"]) for row in counted},
    )


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
