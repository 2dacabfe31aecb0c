"""Is an app alive? Its heartbeat (`app_progress`, `ackfold.track.heartbeat`) read back.

`liveness` reads an app's newest heartbeat rows through delta-rs and says:

- `alive`: every query still running beat within `stall_after`, and none failed;
- `stalled`: a query still running has not beaten for longer than `stall_after` (its
  driver died, or hangs), or a query's last event is a termination with an error, or the
  source lag grew at every one of its last `LAG_SAMPLES` beats (it is falling behind);
- `stopped`: every query's last event is a termination without an error: the end of a
  run to the end of its input (`availableNow`: an app DAG's run), or a stop by hand.
  Not a stall: nothing is alerted;
- `no heartbeat`: no row at all (the app does not install the heartbeat, or runs where it
  cannot write the warehouse).

The UI's app page and the stall alert (`ackfold.alerts.rules`) both use it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from ackfold.ledger.errors import NoLedger
from ackfold.ledger.reading.sql import SqlReader, sql_str, sql_ts
from ackfold.ledger.schema.tables import APP_PROGRESS
from ackfold.ledger.schema.values import iso, utc

ALIVE: Final = "alive"
STALLED: Final = "stalled"
STOPPED: Final = "stopped"
NO_HEARTBEAT: Final = "no heartbeat"
DEFAULT_STALL_AFTER: Final = timedelta(minutes=5)
# How far back the page's chart and the lag trend look.
HISTORY: Final = timedelta(hours=6)
MAX_ROWS: Final = 2000
LAG_SAMPLES: Final = 5
_TERMINATED: Final = "terminated"  # `ackfold.track.heartbeat.TERMINATED`
_COLUMNS: Final = (
    "query_id",
    "query_name",
    "event",
    "batch_id",
    "batch_at",
    "input_rows_per_second",
    "processed_rows_per_second",
    "source_lag",
    "exception",
    "recorded_at",
)


@dataclass(frozen=True)
class Beat:
    """One heartbeat row, in UTC."""

    query_id: str
    query_name: str | None
    event: str
    batch_id: int | None
    batch_at: datetime | None
    input_rate: float | None
    processed_rate: float | None
    lag: int | None
    exception: str | None
    at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "query_name": self.query_name,
            "event": self.event,
            "batch_id": self.batch_id,
            "batch_at": iso(self.batch_at, precise=True) if self.batch_at else None,
            "input_rows_per_second": self.input_rate,
            "processed_rows_per_second": self.processed_rate,
            "source_lag": self.lag,
            "exception": self.exception,
            "recorded_at": iso(self.at, precise=True),
        }


@dataclass(frozen=True)
class Liveness:
    """An app's state by its heartbeat at `now`; `beats` oldest first (the chart's data)."""

    app: str
    state: str
    why: str
    now: datetime
    stall_after: timedelta
    last: Beat | None = None
    last_batch: Beat | None = None
    lag_growing: bool = False
    beats: list[Beat] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "state": self.state,
            "why": self.why,
            "stall_after_seconds": self.stall_after.total_seconds(),
            "last": self.last.to_json() if self.last else None,
            "last_batch": self.last_batch.to_json() if self.last_batch else None,
            "lag_growing": self.lag_growing,
            "beats": [beat.to_json() for beat in self.beats],
        }


def liveness(
    reader: SqlReader,
    app: str,
    now: datetime,
    stall_after: timedelta = DEFAULT_STALL_AFTER,
) -> Liveness:
    """`app`'s state at `now` from its heartbeat rows of the last `HISTORY`."""
    now = utc(now)
    try:
        rows = reader.query(
            APP_PROGRESS,
            _COLUMNS,
            [f"app = {sql_str(app)}", f"recorded_at >= {sql_ts(now - HISTORY)}"],
            order="recorded_at DESC",
            limit=MAX_ROWS,
            required=True,
        )
    except NoLedger:
        rows = []
    beats = [_beat(row) for row in reversed(rows)]
    if not beats:
        why = f"no app_progress row of {app} in the last {_hours(HISTORY)}"
        return Liveness(app, NO_HEARTBEAT, why, now, stall_after)
    last = beats[-1]
    batches = [b for b in beats if b.batch_id is not None]
    last_batch = batches[-1] if batches else None
    lags = [b.lag for b in beats if b.lag is not None][-LAG_SAMPLES:]
    growing = len(lags) == LAG_SAMPLES and all(a < b for a, b in itertools.pairwise(lags))
    # Each query's newest beat: a query restarted on its checkpoint keeps its id. Its name
    # comes with its progress, not with every event (an idle beat, a termination).
    newest = {beat.query_id: beat for beat in beats}
    names = {beat.query_id: beat.query_name for beat in beats if beat.query_name}
    failed = [b for b in newest.values() if b.event == _TERMINATED and b.exception]
    running = [b for b in newest.values() if b.event != _TERMINATED]
    quiet = now - last.at
    if failed:
        end = failed[-1]
        why = f"query {names.get(end.query_id, end.query_id)} stopped at {iso(end.at)}: "
        why += (end.exception or "").splitlines()[0][:200]
        state = STALLED
    elif not running:
        why = (
            f"its queries ended without an error, the last at {iso(last.at)} (a run to the "
            "end of its input, or a stop)"
        )
        state = STOPPED
    elif now - (oldest := min(running, key=lambda beat: beat.at)).at > stall_after:
        silent = now - oldest.at
        name = names.get(oldest.query_id, oldest.query_id)
        why = f"no heartbeat of query {name} for {_ago(silent)} (more than {_ago(stall_after)})"
        state = STALLED
    elif growing:
        why = f"its source lag grew at each of its last {LAG_SAMPLES} heartbeats: {lags}"
        state = STALLED
    else:
        why = f"last heartbeat {_ago(quiet)} ago"
        state = ALIVE
    return Liveness(app, state, why, now, stall_after, last, last_batch, growing, beats)


def _beat(row: dict[str, Any]) -> Beat:
    return Beat(
        query_id=str(row["query_id"]),
        query_name=row["query_name"],
        event=str(row["event"]),
        batch_id=row["batch_id"],
        batch_at=utc(row["batch_at"]) if row["batch_at"] else None,
        input_rate=row["input_rows_per_second"],
        processed_rate=row["processed_rows_per_second"],
        lag=row["source_lag"],
        exception=row["exception"],
        at=utc(row["recorded_at"]),
    )


def _ago(delta: timedelta) -> str:
    total = max(0, int(delta.total_seconds()))
    minutes, seconds = divmod(total, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {seconds}s" if minutes else f"{seconds}s"


def _hours(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 3600:g}h"
