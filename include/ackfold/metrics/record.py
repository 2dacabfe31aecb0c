"""What ackfold measures, and from where.

From a run's own summary (the process that did the work):
- `ackfold.reconcile.events_read`, `.events_folded`, `.duplicates_dropped` (counters);
- `ackfold.replay.sent`, `.failed` (planned, not sent), `.dead_lettered` (counters);
- `ackfold.maintenance.roots_expired`, `.events_deleted`, `.rows_deleted` (report rows,
  by `ackfold.table`), `.files_removed` and `.bytes_removed` (what VACUUM deleted, by
  `ackfold.table`), `.tables_optimized`, `.tables_checkpointed` (counters), and
  `ackfold.maintenance.step.duration` (gauge, s: each step's time, by `ackfold.step`).

From `root_state` after each reconcile (`LedgerGauges`, read without a JVM):
- `ackfold.roots` (gauge): roots by `ackfold.app` and `ackfold.status`;
- `ackfold.roots.oldest_pending_age` (gauge, s): per app, 0 with none pending;
- `ackfold.detect.duration` (histogram, s): time to detect of each root a reconcile of
  this run marked failed or timed out (`ackfold.kind`), per app.

Counters carry `ackfold.scope` (the run's app, or `all`) and, for replays,
`ackfold.requested_by` (`auto`, or who asked).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import Settings
from ackfold.ledger.reading.recovery import RECOVERY_COLUMNS, detected_at, due_at
from ackfold.ledger.reading.sql import SqlReader, sql_str, sql_ts
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ROOT_STATE
from ackfold.ledger.schema.values import utc

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter

# Seconds: a detection is due within one reconcile interval (minutes); an outage, hours.
DETECT_BUCKETS: Final = (1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
_MARKED: Final = (status.FAILED, status.TIMED_OUT, status.REPLAYED, status.DEAD_LETTERED)


def record_reconcile(meter: Meter, summary: Mapping[str, Any]) -> None:
    """The counters of one reconcile run's summary (`ackfold.runs.reconcile.run_reconcile`)."""
    scope = {"ackfold.scope": summary.get("app") or "all"}
    for name, key, what in (
        ("events_read", "events_read", "events read from ack_events"),
        ("events_folded", "events_folded", "events folded into an ack val"),
        ("duplicates_dropped", "duplicates_dropped", "repeated events dropped before the fold"),
    ):
        counter = meter.create_counter(f"ackfold.reconcile.{name}", "{event}", what)
        counter.add(int(summary.get(key) or 0), scope)


def record_replay(meter: Meter, summary: Mapping[str, Any], *, requested_by: str) -> None:
    """The counters of one replay run's summary (`ReplaySummary.as_dict()`); a dry run
    sends nothing and counts nothing."""
    if summary.get("dry_run"):
        return
    attributes = {
        "ackfold.scope": summary.get("app") or "all",
        "ackfold.requested_by": requested_by,
    }
    for name, key, what in (
        ("sent", "sent", "replays sent to their source queue"),
        ("failed", "not_sent", "replays planned and not sent (the next run sends them)"),
        ("dead_lettered", "dead_lettered", "roots dead-lettered: no attempt left"),
    ):
        counter = meter.create_counter(f"ackfold.replay.{name}", "{message}", what)
        counter.add(int(summary.get(key) or 0), attributes)


def record_maintenance(meter: Meter, summary: Mapping[str, Any]) -> None:
    """The counters and step times of one maintenance run's summary (`run_maintenance`);
    a dry run deletes nothing and counts nothing."""
    if summary.get("dry_run"):
        return
    engine = {"ackfold.engine": str(summary.get("engine") or "embedded")}
    for name, key, unit, what in (
        ("roots_expired", "roots_expired", "{root}", "settled roots whose old events went"),
        ("events_deleted", "events_deleted", "{event}", "ack_events rows deleted by retention"),
    ):
        meter.create_counter(f"ackfold.maintenance.{name}", unit, what).add(
            int(summary.get(key) or 0), engine
        )
    rows = meter.create_counter(
        "ackfold.maintenance.rows_deleted", "{row}", "report rows deleted by retention"
    )
    for table, count in sorted((summary.get("reports_deleted") or {}).items()):
        rows.add(int(count or 0), {**engine, "ackfold.table": table})
    files = meter.create_counter(
        "ackfold.maintenance.files_removed", "{file}", "data files VACUUM deleted"
    )
    size = meter.create_counter("ackfold.maintenance.bytes_removed", "By", "bytes VACUUM deleted")
    for table, figures in sorted((summary.get("removed") or {}).items()):
        files.add(int(figures.get("files") or 0), {**engine, "ackfold.table": table})
        size.add(int(figures.get("bytes") or 0), {**engine, "ackfold.table": table})
    for name, key, what in (
        ("tables_optimized", "optimized", "tables Z-ordered or compacted"),
        ("tables_checkpointed", "checkpointed", "tables checkpointed, their logs cleaned up"),
    ):
        meter.create_counter(f"ackfold.maintenance.{name}", "{table}", what).add(
            len(summary.get(key) or ()), engine
        )
    steps = meter.create_gauge(
        "ackfold.maintenance.step.duration", "s", "seconds each step of the run took"
    )
    for step, seconds in sorted((summary.get("seconds_by_step") or {}).items()):
        steps.set(float(seconds), {**engine, "ackfold.step": step})


@dataclass
class LedgerGauges:
    """What `root_state` says now: roots by app and status, the oldest pending root's age
    per app, and the time to detect of the roots marked since a moment."""

    by_status: dict[tuple[str, str], int] = field(default_factory=dict)
    oldest_pending: dict[str, float] = field(default_factory=dict)
    detect: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    @classmethod
    def read(
        cls, reader: SqlReader, settings: Settings, *, now: datetime, since: datetime | None
    ) -> LedgerGauges:
        """Read them; `since` (the run's start) bounds the detections (None: none)."""
        gauges = cls()
        for row in reader.query(
            ROOT_STATE, ["app", "status", "count(*) AS n"], group="app, status", required=True
        ):
            gauges.by_status[(row["app"], row["status"])] = int(row["n"])
        apps = {app for app, _ in gauges.by_status}
        gauges.oldest_pending = dict.fromkeys(sorted(apps), 0.0)
        for row in reader.query(
            ROOT_STATE,
            ["app", "min(first_event_at) AS oldest"],
            [f"status = {sql_str(status.PENDING)}"],
            group="app",
        ):
            age = (utc(now) - utc(row["oldest"])).total_seconds()
            gauges.oldest_pending[row["app"]] = max(0.0, age)
        if since is not None:
            gauges.detect = _detections(reader, settings, utc(since))
        return gauges


def _detections(
    reader: SqlReader, settings: Settings, since: datetime
) -> dict[tuple[str, str], list[float]]:
    """Seconds from due to marked, of the roots marked failed or timed out since `since`,
    by app and kind."""
    where = [
        f"status IN ({', '.join(sql_str(s) for s in _MARKED)})",
        # A replay restamps it later, never earlier: a bound that prunes files.
        f"status_changed_at >= {sql_ts(since)}",
    ]
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in reader.query(ROOT_STATE, RECOVERY_COLUMNS, where):
        marked = detected_at(row)
        if marked is None or marked < since:
            continue
        kind = status.FAILED if row["fail_at"] is not None else status.TIMED_OUT
        due = due_at(row, settings.app(row["app"]))
        out[(row["app"], kind)].append(max(0.0, (marked - due).total_seconds()))
    return dict(out)


def record_ledger(meter: Meter, gauges: LedgerGauges) -> None:
    """Record `gauges` on `meter`."""
    roots = meter.create_gauge("ackfold.roots", "{root}", "roots in root_state by status")
    for (app, state), n in sorted(gauges.by_status.items()):
        roots.set(n, {"ackfold.app": app, "ackfold.status": state})
    age = meter.create_gauge(
        "ackfold.roots.oldest_pending_age", "s", "age of the oldest pending root (0: none)"
    )
    for app, seconds in sorted(gauges.oldest_pending.items()):
        age.set(seconds, {"ackfold.app": app})
    detect = meter.create_histogram(
        "ackfold.detect.duration",
        "s",
        "time to detect: from when a root was due to when a reconcile marked it",
        explicit_bucket_boundaries_advisory=[float(b) for b in DETECT_BUCKETS],
    )
    for (app, kind), samples in sorted(gauges.detect.items()):
        for seconds in samples:
            detect.record(seconds, {"ackfold.app": app, "ackfold.kind": kind})
