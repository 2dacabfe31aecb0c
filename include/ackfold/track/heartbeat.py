"""The heartbeat of a tracked app: each streaming query's progress, in `app_progress`.

`install_heartbeat` adds a `StreamingQueryListener` to the app's session. It keeps each
query's latest event (a batch's progress, an idle heartbeat, a start, a termination) and
commits the events due to `app_progress` with delta-rs (`LedgerWriter.append_arrow`, the
append-only tables' protocol): at most one row per query per `interval` (30 s by default,
less for an app that may not go long without one: `beat_interval`), the latest, plus a
query's start and its termination at once. So a query that runs a batch a second writes
one small commit every 30 s, and an idle one keeps beating with Spark's idle events.

It is on by default: `ackfold.spark.get_spark(settings, app=...)` installs it, and so does
`get_spark` in the driver of every app DAG's run, which names its app (`ACKFOLD_APP`).

It works the same in a classic session (the listener runs in the driver's Python) and
through Spark Connect, where pyspark 4.1 delivers the listener's events to the client
(`StreamingQueryListenerBus`): the rows are written by the process that installed it,
which must reach the warehouse. Retention: `ackfold_maintenance` deletes rows older than
`maintenance.progress_retention`.

Example:
    >>> from datetime import datetime, timezone
    >>> beat = Heartbeat("wc", write=lambda rows: print([r["event"] for r in rows]),
    ...                  interval=30, clock=iter(range(0, 1000, 10)).__next__)
    >>> beat.record(progress_row("wc", "q1", "r1", None, 0, datetime.now(timezone.utc)))
    ['progress']
    >>> beat.record(progress_row("wc", "q1", "r1", None, 1, datetime.now(timezone.utc)))
    >>> beat.record(progress_row("wc", "q1", "r1", None, 2, datetime.now(timezone.utc)))
    >>> beat.record(progress_row("wc", "q1", "r1", None, 3, datetime.now(timezone.utc)))
    ['progress']
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ackfold.ledger.schema.tables import APP_PROGRESS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ackfold.config import Settings

log = logging.getLogger("ackfold.track.heartbeat")

DEFAULT_INTERVAL: Final = 30.0  # seconds
PROGRESS, IDLE, STARTED, TERMINATED = "progress", "idle", "started", "terminated"
# Kafka's source metrics, the offsets a source is behind the latest (Spark reports them
# per source in `SourceProgress.metrics`); other sources report no lag.
_LAG_METRIC: Final = "maxOffsetsBehindLatest"

Row = dict[str, Any]


def progress_row(
    app: str,
    query_id: str,
    run_id: str,
    query_name: str | None,
    batch_id: int | None,
    batch_at: datetime | None,
    *,
    event: str = PROGRESS,
    input_rows: int | None = None,
    input_rate: float | None = None,
    processed_rate: float | None = None,
    source_lag: int | None = None,
    exception: str | None = None,
) -> Row:
    """One `app_progress` row (`recorded_at` is set when it is written)."""
    return {
        "app": app,
        "query_id": query_id,
        "run_id": run_id,
        "query_name": query_name,
        "event": event,
        "batch_id": batch_id,
        "batch_at": batch_at,
        "input_rows": input_rows,
        "input_rows_per_second": input_rate,
        "processed_rows_per_second": processed_rate,
        "source_lag": source_lag,
        "exception": exception,
        "recorded_at": None,
    }


class Heartbeat:
    """Throttles `app`'s query events to `write`: a query's latest event is written when
    `interval` seconds have passed since its last write (or since it was first seen); a
    start or a termination at once. `clock` is monotonic seconds."""

    def __init__(
        self,
        app: str,
        write: Callable[[Sequence[Row]], None],
        *,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"heartbeat interval must be > 0 seconds, got {interval!r}")
        self.app = app
        self.interval = interval
        self._write = write
        self._clock = clock
        self._latest: dict[str, Row] = {}
        self._written_at: dict[str, float] = {}
        self._lock = threading.Lock()
        # The session's listener, once installed (`spark.streams.removeListener` takes it).
        self.listener: Any = None

    def record(self, row: Row) -> None:
        """Keep `row` as its query's latest event; write the events that are due."""
        with self._lock:
            now = self._clock()
            query = row["query_id"]
            self._latest[query] = row
            urgent = row["event"] in (STARTED, TERMINATED)
            # A query's throttle starts when it is first seen, so that its first progress
            # waits for its start: Spark Connect posts the start once `start()` returns, and
            # the first progress may come before it. Without a start (a listener added to a
            # running query), the progress is written an interval later.
            self._written_at.setdefault(query, now)
            due = [
                q
                for q in self._latest
                if (q == query and urgent)
                or now - self._written_at.get(q, float("-inf")) >= self.interval
            ]
            rows = [self._latest.pop(q) for q in due]
            for q in due:
                self._written_at[q] = now
        if rows:
            self._commit(rows)

    def flush(self) -> None:
        """Write every event not written yet (on shutdown)."""
        with self._lock:
            rows = list(self._latest.values())
            self._latest.clear()
        if rows:
            self._commit(rows)

    def _commit(self, rows: list[Row]) -> None:
        at = datetime.now(UTC)
        for row in rows:
            row["recorded_at"] = at
        try:
            self._write(rows)
        except Exception:  # a heartbeat must never stop the app's queries
            log.exception(
                "heartbeat: cannot write %d app_progress row(s) of %s", len(rows), self.app
            )


def ledger_write(settings: Settings) -> Callable[[Sequence[Row]], None]:
    """`Heartbeat`'s `write`: one delta-rs append to `app_progress` of the warehouse."""
    from ackfold.ledger.commits.writer import LedgerWriter

    writer = LedgerWriter(settings.table_root)

    def write(rows: Sequence[Row]) -> None:
        import pyarrow as pa

        from ackfold.ledger.schema.contract import arrow_schema

        schema = arrow_schema(APP_PROGRESS)
        columns = {field.name: [row.get(field.name) for row in rows] for field in schema}
        writer.append_arrow(APP_PROGRESS, pa.table(columns, schema=schema))

    return write


def from_progress(app: str, progress: Any) -> Row:
    """The row of a `StreamingQueryProgress` (classic and Connect alike)."""
    lag = None
    for source in progress.sources or ():
        metrics: Mapping[str, Any] = source.metrics or {}
        if _LAG_METRIC in metrics and metrics[_LAG_METRIC] is not None:
            behind = int(float(metrics[_LAG_METRIC]))
            lag = behind if lag is None else max(lag, behind)
    return progress_row(
        app,
        str(progress.id),
        str(progress.runId),
        progress.name,
        int(progress.batchId),
        _time(progress.timestamp),
        input_rows=int(progress.numInputRows),
        input_rate=_rate(progress.inputRowsPerSecond),
        processed_rate=_rate(progress.processedRowsPerSecond),
        source_lag=lag,
    )


def beat_interval(settings: Settings, app: str) -> float:
    """Seconds between two heartbeats of a query of `app`: 30, or a third of the app's
    `alerts.max_heartbeat_age` when that is shorter, so that a live app beats three times
    before it could be taken for stalled (Spark's idle events come every 10 s).

    Example:
        >>> from ackfold.config import load_settings
        >>> settings = load_settings(apps={"fast": {"alerts": {"max_heartbeat_age": "45s"}}})
        >>> beat_interval(settings, "fast"), beat_interval(settings, "other")
        (15.0, 30.0)
    """
    limit = settings.app(app).alerts.max_heartbeat_age
    if not isinstance(limit, timedelta):
        return DEFAULT_INTERVAL
    return min(DEFAULT_INTERVAL, limit.total_seconds() / 3)


def install_heartbeat(
    spark: SparkSession,
    settings: Settings,
    app: str,
    *,
    interval: float | None = None,
    write: Callable[[Sequence[Row]], None] | None = None,
) -> Heartbeat:
    """Record the progress of every streaming query of `spark` as `app`'s heartbeat, at
    most one `app_progress` row per query per `interval` seconds (default: `beat_interval`).
    Returns the `Heartbeat`: call `flush()` before the session stops.

    Once per session and app: called again (the app's own code, and `get_spark(app=...)`
    before it), it returns the heartbeat already installed, and no row is written twice."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    key = (id(spark), app, settings.table_root)
    with _INSTALLED_LOCK:
        session, installed = _INSTALLED.get(key, (None, None))
        if installed is not None and session is not None and session() is spark:
            return installed
        every = interval if interval is not None else beat_interval(settings, app)
        beat = Heartbeat(app, write or ledger_write(settings), interval=every)
        # A weak reference: a session gone (and its id taken by another) is not this one.
        _INSTALLED[key] = (weakref.ref(spark), beat)

    class _Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            at = _time(event.timestamp)
            row = progress_row(app, str(event.id), str(event.runId), event.name, None, at)
            beat.record({**row, "event": STARTED})

        def onQueryProgress(self, event: Any) -> None:
            beat.record(from_progress(app, event.progress))

        def onQueryIdle(self, event: Any) -> None:
            row = progress_row(app, str(event.id), str(event.runId), None, None, None)
            beat.record({**row, "event": IDLE, "batch_at": _time(event.timestamp)})

        def onQueryTerminated(self, event: Any) -> None:
            row = progress_row(app, str(event.id), str(event.runId), None, None, None)
            beat.record({**row, "event": TERMINATED, "exception": event.exception})

    beat.listener = _Listener()
    spark.streams.addListener(beat.listener)
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        _remove_before_exit(spark, beat)
    log.info("heartbeat of %s: app_progress, every %gs per query", app, every)
    return beat


def _remove_before_exit(spark: SparkSession, beat: Heartbeat) -> None:
    """On Spark Connect a listener's events arrive on a thread that is not a daemon: an
    app that ends without removing its heartbeat would never exit. Remove it (and write
    what it holds) when the interpreter starts to exit, before it waits for its threads:
    the hook concurrent.futures uses for its own workers."""

    def remove() -> None:
        try:
            remove_heartbeat(spark, beat)
        except Exception as exc:  # the session is gone already: nothing left to remove
            log.debug("heartbeat of %s: not removed at exit (%s)", beat.app, exc)

    register = getattr(threading, "_register_atexit", None)
    if register is None:  # pragma: no cover - every CPython from 3.9 has it
        log.warning("heartbeat of %s: remove it before exit (remove_heartbeat)", beat.app)
        return
    register(remove)


def remove_heartbeat(spark: SparkSession, beat: Heartbeat) -> None:
    """Take `beat`'s listener off `spark` and write what it holds: before the session
    stops. A later `install_heartbeat` installs a new one."""
    with _INSTALLED_LOCK:
        for key in [k for k, (_, installed) in _INSTALLED.items() if installed is beat]:
            del _INSTALLED[key]
    if beat.listener is not None:
        spark.streams.removeListener(beat.listener)
        beat.listener = None
    beat.flush()


# The heartbeat of each session, app and warehouse (`install_heartbeat`).
_INSTALLED: dict[tuple[int, str, str], tuple[weakref.ref[Any], Heartbeat]] = {}
_INSTALLED_LOCK = threading.Lock()


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _rate(value: Any) -> float | None:
    try:
        rate = float(value)
    except (TypeError, ValueError):
        return None
    return None if rate != rate else rate  # NaN (no batch yet) is no rate
