"""Time to detect and time to recover, from `root_state`: how long a fault went unseen,
and how long until a replay put it right.

- **time to detect**: from the moment a root was due (its first fail event, or its
  app's `timeout` after its first event, or the idle timeout after its last) to the
  moment a reconcile marked it `failed` or `timed_out`. Goal: at most one reconcile
  interval.
- **time to recover**: from the moment the first attempt of a message was due to the
  moment a later attempt completed (its last event). Goal: the app's backoff plus one
  reconcile and one replay interval.

When a root was marked is its `status_changed_at` while it is `failed` or `timed_out`.
A replay then moves it on and stamps `status_changed_at` anew, but leaves `reconciled_at`
(the last reconcile that changed the row) alone: the earlier of the two is when it was
marked, unless events arrived after it (then an upper bound). A root `completed_late`
lost that time to its late completion: it counts towards recovery, not detection.

The same rows come from delta-rs (`read_recovery`, for the Reliability UI and the alerts)
or from Spark (the demo's delivery report): `RECOVERY_COLUMNS` where `RECOVERY_WHERE`.

Example:
    >>> from datetime import datetime, timedelta, timezone
    >>> from ackfold.config.policy import AppPolicy
    >>> t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    >>> rows = [
    ...     dict(root_id=1, app="a", status="replayed", attempt=1, origin_root_id=1,
    ...          first_event_at=t0, last_event_at=t0, status_changed_at=t0 + timedelta(minutes=9),
    ...          fail_at=None, reconciled_at=t0 + timedelta(minutes=7)),
    ...     dict(root_id=2, app="a", status="completed", attempt=2, origin_root_id=1,
    ...          first_event_at=t0 + timedelta(minutes=9), last_event_at=t0 + timedelta(minutes=10),
    ...          status_changed_at=t0 + timedelta(minutes=12), fail_at=None,
    ...          reconciled_at=t0 + timedelta(minutes=12)),
    ... ]
    >>> times = recovery_times(rows, lambda app: AppPolicy(timeout=timedelta(minutes=5)))
    >>> times.detect.p50, times.recover.p50
    (120.0, 300.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ackfold.ledger.reading.sql import SqlReader, app_since, select, sql_str, sql_ts
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ROOT_STATE
from ackfold.ledger.schema.values import utc

if TYPE_CHECKING:
    import pyarrow as pa

    from ackfold.config import Settings
    from ackfold.config.policy import AppPolicy

RECOVERY_COLUMNS: Final = (
    "root_id",
    "app",
    "status",
    "attempt",
    "origin_root_id",
    "first_event_at",
    "last_event_at",
    "status_changed_at",
    "fail_at",
    "reconciled_at",
)
# Roots that failed or timed out (whatever became of them since), and every later attempt:
# the completed first attempts, the bulk of a ledger, are not read. Spark and DataFusion
# both take this SQL.
DETECTED: Final = (
    status.FAILED,
    status.TIMED_OUT,
    status.REPLAYED,
    status.DEAD_LETTERED,
    status.COMPLETED_LATE,
)
RECOVERY_WHERE: Final = (
    f"status IN ({', '.join(sql_str(s) for s in DETECTED)}) "
    f"OR (status = {sql_str(status.COMPLETED)} AND attempt > 1)"
)


@dataclass(frozen=True)
class Percentiles:
    """`count` samples, in seconds: their median and 99th percentile (None if none)."""

    count: int
    p50: float | None
    p99: float | None

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Percentiles:
        ordered = sorted(seconds)
        return cls(len(ordered), percentile(ordered, 0.5), percentile(ordered, 0.99))


@dataclass(frozen=True)
class RecoveryTimes:
    """Time to detect (per root) and to recover (per message), and the messages that
    failed and have no completed replay yet (`unrecovered`)."""

    detect: Percentiles
    recover: Percentiles
    unrecovered: int

    def to_json(self) -> dict[str, Any]:
        return {
            "detect": vars(self.detect),
            "recover": vars(self.recover),
            "unrecovered": self.unrecovered,
        }


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """The `q` quantile of the sorted `ordered`, interpolated between neighbours.

    Example:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5), percentile([], 0.5)
        (2.5, None)
    """
    if not ordered:
        return None
    at = q * (len(ordered) - 1)
    low, high = math.floor(at), math.ceil(at)
    value = ordered[low] + (ordered[high] - ordered[low]) * (at - low)
    return round(value, 3)


def due_at(row: Mapping[str, Any], policy: AppPolicy) -> datetime:
    """When the root of `row` was due: its first fail event, else when its timeout (and
    idle timeout, if the app has one) had passed."""
    if row.get("fail_at") is not None:
        return utc(row["fail_at"])
    due = utc(row["first_event_at"]) + policy.timeout
    if policy.idle_timeout is not None:
        due = max(due, utc(row["last_event_at"]) + policy.idle_timeout)
    return due


def detected_at(row: Mapping[str, Any]) -> datetime | None:
    """When a reconcile marked the root of `row` failed or timed out (None if it was
    never marked, or a late completion overwrote the time)."""
    state = row["status"]
    if state in (status.FAILED, status.TIMED_OUT):
        return utc(row["status_changed_at"])
    if state in (status.REPLAYED, status.DEAD_LETTERED):
        return min(utc(row["reconciled_at"]), utc(row["status_changed_at"]))
    return None


def recovery_times(
    rows: Iterable[Mapping[str, Any]], policy_of: Callable[[str], AppPolicy]
) -> RecoveryTimes:
    """Time to detect and to recover over `rows` (`RECOVERY_COLUMNS` of `root_state`)."""
    detect: list[float] = []
    first_due: dict[int, datetime] = {}  # message (origin root) -> when it first went wrong
    recovered: dict[int, datetime] = {}  # message -> when a later attempt completed
    for row in rows:
        origin = int(row["origin_root_id"] or row["root_id"])
        if row["status"] == status.COMPLETED:
            done = utc(row["last_event_at"])
            recovered[origin] = min(done, recovered.get(origin, done))
            continue
        due = due_at(row, policy_of(str(row["app"])))
        marked = detected_at(row)
        if marked is not None:
            # A reconcile cannot see a root before it is due; clock skew can say otherwise.
            detect.append(max(0.0, (marked - due).total_seconds()))
        first_due[origin] = min(due, first_due.get(origin, due))
    recover = [
        max(0.0, (recovered[origin] - due).total_seconds())
        for origin, due in first_due.items()
        if origin in recovered
    ]
    return RecoveryTimes(
        Percentiles.of(detect),
        Percentiles.of(recover),
        unrecovered=sum(1 for origin in first_due if origin not in recovered),
    )


def read_recovery(
    reader: SqlReader,
    settings: Settings,
    *,
    app: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> RecoveryTimes:
    """`recovery_times` of the roots of `app` (every app if None) whose first event is in
    [since, until), read without a JVM.

    The same numbers as `recovery_times` over the same rows, computed in delta-rs: a
    ledger of 10M roots has about 800,000 that failed or timed out, which Python took
    seconds to read row by row. One query gives each root's time to detect, another each
    message's time to recover (its roots grouped by origin); Arrow takes the percentiles."""
    import pyarrow.compute as pc

    where = app_since(app, since)
    if until is not None:
        # A message's recovery (a later attempt completing) may come after `until`.
        later = until + settings.reconcile.lookback
        where.append(
            f"first_event_at < {sql_ts(until)} OR (status = {sql_str(status.COMPLETED)} "
            f"AND first_event_at < {sql_ts(later)})"
        )
    due = _due_micros(settings)
    marked = (
        f"CASE WHEN status IN ({_listed(MARKED_AT_CHANGE)}) THEN {_us('status_changed_at')} "
        f"ELSE least({_us('reconciled_at')}, {_us('status_changed_at')}) END"
    )
    marked_where = f"status IN ({_listed((*MARKED_AT_CHANGE, *MARKED_AT_RECONCILE))})"
    detect = reader.arrow(
        ROOT_STATE,
        select(ROOT_STATE, [f"greatest({marked} - {due}, 0) AS us"], [marked_where, *where]),
    )["us"]
    done = sql_str(status.COMPLETED)
    per_message = select(
        ROOT_STATE,
        [
            f"min(CASE WHEN status <> {done} THEN {due} END) AS first_due",
            f"min(CASE WHEN status = {done} THEN {_us('last_event_at')} END) AS recovered",
        ],
        [RECOVERY_WHERE, *where],
        group="COALESCE(origin_root_id, root_id)",
    )
    # Each message that went wrong: how long from its first due root to a completed
    # attempt; null while none completed (`greatest` would take a null for 0).
    recover = reader.arrow(
        ROOT_STATE,
        "SELECT CASE WHEN recovered IS NOT NULL THEN greatest(recovered - first_due, 0) END "  # noqa: S608 - ackfold's own SQL
        f"AS us FROM ({per_message}) AS m WHERE first_due IS NOT NULL",
    )["us"]
    return RecoveryTimes(
        _percentiles(detect, pc), _percentiles(recover, pc), unrecovered=recover.null_count
    )


# When a reconcile marked a root (`detected_at`): at its last status change while it is
# failed or timed out; once replayed or dead-lettered, the earlier of that and its reconcile.
MARKED_AT_CHANGE: Final = (status.FAILED, status.TIMED_OUT)
MARKED_AT_RECONCILE: Final = (status.REPLAYED, status.DEAD_LETTERED)


def _us(column: str) -> str:
    """A timestamp column as microseconds since the epoch (Delta's own unit)."""
    return f"CAST({column} AS BIGINT)"


def _listed(statuses: Sequence[str]) -> str:
    return ", ".join(sql_str(s) for s in statuses)


def _due_micros(settings: Settings) -> str:
    """`due_at` in SQL, in microseconds: the first fail event, else the root's first event
    plus its app's timeout (and its last event plus the idle timeout, if the app has
    one), per app as the settings give each policy."""

    def due(policy: AppPolicy) -> str:
        at = f"{_us('first_event_at')} + {_micros(policy.timeout)}"
        if policy.idle_timeout is not None:
            at = f"greatest({at}, {_us('last_event_at')} + {_micros(policy.idle_timeout)})"
        return at

    apps = "".join(
        f" WHEN {sql_str(name)} THEN {due(settings.app(name))}" for name in settings.apps
    )
    by_app = f"CASE app{apps} ELSE {due(settings.defaults)} END" if apps else due(settings.defaults)
    return f"COALESCE({_us('fail_at')}, {by_app})"


def _micros(delta: timedelta) -> int:
    return int(delta / timedelta(microseconds=1))


def _percentiles(micros: pa.ChunkedArray, pc: Any) -> Percentiles:
    """`Percentiles.of` the non-null values of `micros`, in seconds, computed in Arrow."""
    seconds = pc.divide(pc.cast(pc.drop_null(micros), "float64"), 1e6)
    if len(seconds) == 0:
        return Percentiles(0, None, None)
    p50, p99 = pc.quantile(seconds, q=[0.5, 0.99], interpolation="linear").to_pylist()
    return Percentiles(len(seconds), round(p50, 3), round(p99, 3))
