"""Per-app reliability policy: how long a root may take, how often it is retried, what the
quality checks allow and when to alert (`defaults:`, and each app's overrides under `apps:`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, TypeAdapter

from ackfold.config.values import Duration, Rate, Schedule, Section

_DURATION: TypeAdapter[timedelta] = TypeAdapter(Duration)


def _count_limit(value: Any) -> int | Literal["off"]:
    if value == "off":
        return "off"
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a limit: use a whole number from 0, or off")
    return value


def _duration_limit(value: Any) -> timedelta | Literal["off"]:
    if value == "off":
        return "off"
    try:
        return _DURATION.validate_python(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not a limit: use a duration such as 90s, 5m, 1h, or off"
        ) from None


class QualityThresholds(Section):
    """What the delivery-guarantee checks (`ackfold quality`) allow one app.

    - `grace`: how long after its timeout a root may still be unsettled (a reconcile and
      a replay have to run, with backoff) before it counts as lost.
    - `max_duplicate_rate`: the most messages, as a fraction, processed more than once
      (a root `completed_late` after its replay was sent).
    - `max_dead_letter_rate`: the most messages, as a fraction, that end dead-lettered.
    - `latency_p99`: the SLA of the complete latency (first to last event of a completed
      root), 99th percentile; unset, the app's `timeout`.
    """

    grace: Duration = timedelta(minutes=15)
    max_duplicate_rate: float = Field(0.01, ge=0, le=1)
    max_dead_letter_rate: float = Field(0.01, ge=0, le=1)
    latency_p99: Duration | None = None


class QualityOverrides(Section):
    """An app's `quality:` entry: any field left out falls back to `defaults.quality`."""

    grace: Duration | None = None
    max_duplicate_rate: float | None = Field(None, ge=0, le=1)
    max_dead_letter_rate: float | None = Field(None, ge=0, le=1)
    latency_p99: Duration | None = None


# A count limit, or "off": the rule never fires for the app. One validator each, so that
# a bad value gets one error that names both forms.
CountLimit = Annotated[int | Literal["off"], PlainValidator(_count_limit)]
# A duration limit, or "off"; unset, a limit derived from the app's other settings.
DurationLimit = Annotated[timedelta | Literal["off"], PlainValidator(_duration_limit)]


class AlertThresholds(Section):
    """When `ackfold_reconcile` and `ackfold_quality` alert about one app
    (`ackfold.alerts`). A breach opens when a value exceeds its limit.

    - `max_failed`, `max_timed_out`, `max_dead_lettered`: roots found failed, timed out or
      dead-lettered within `alerts.window` before the evaluation.
    - `max_unsettled_age`: the age of the oldest root still `pending`, `timed_out` or
      `failed`; unset, the app's `timeout` plus its `quality.grace`.
    - `max_latency_p99`: the complete latency p99 of the roots completed within the
      window; unset, the app's `quality.latency_p99`, else its `timeout`.
    - `quality`: alert when the app's quality checks fail.
    - `max_heartbeat_age`: the app is stalled when a query of it has not beaten for this
      long, has stopped with an error, or its source lag keeps growing
      (`ackfold.ledger.reading.progress`); unset, 5 minutes. Apps without a heartbeat are not
      judged. A query beats three times per this age (`track.heartbeat.beat_interval`).
    """

    max_failed: CountLimit = 10
    max_timed_out: CountLimit = 10
    max_dead_lettered: CountLimit = 0
    max_unsettled_age: DurationLimit | None = None
    max_latency_p99: DurationLimit | None = None
    quality: bool = True
    max_heartbeat_age: DurationLimit | None = None


class AlertOverrides(Section):
    """An app's `alerts:` entry: any field left out falls back to `defaults.alerts`."""

    max_failed: CountLimit | None = None
    max_timed_out: CountLimit | None = None
    max_dead_lettered: CountLimit | None = None
    max_unsettled_age: DurationLimit | None = None
    max_latency_p99: DurationLimit | None = None
    quality: bool | None = None
    max_heartbeat_age: DurationLimit | None = None


class AppPolicy(Section):
    """Per-app reliability policy: how long a root may take, and how often it is retried."""

    timeout: Duration = timedelta(minutes=5)
    idle_timeout: Duration | None = None
    max_attempts: int = Field(3, ge=1, le=100)
    # Attempt k+1 is sent no sooner than replay_backoff * 2**(k-1) after attempt k failed.
    replay_backoff: Duration = timedelta(seconds=30)
    # Messages per second an automatic replay sends back to the app's source queue
    # (the range of `ackfold replay --rate` and the manual replay's `rate`).
    replay_rate: Rate = 50.0
    quality: QualityThresholds = QualityThresholds()
    alerts: AlertThresholds = AlertThresholds()


class AppDag(Section):
    """`apps.<app>.dag`: the Airflow DAG `ackfold_app_<app>` that runs the app.

    Each run spark-submits `application` on `spark_default` (or, with `spark.remote` set,
    runs it through Spark Connect), and the app takes what its source holds and stops
    (`trigger(availableNow=True)`). A run that ends well updates the app's asset
    (`ackfold_app_<app>`), which triggers `ackfold_reconcile`.

    - `application`: the app's entry point: a file (a relative path is taken from the
      directory of the configuration file, else the working directory), or a URI
      spark-submit fetches itself (`s3a://...`, `hdfs://...`, `local:///...`).
    - `args`: its arguments; `schedule`: a cron or a preset (default `@hourly`);
      `owner` and `tags`: as the Airflow UI shows and filters them.
    - `execution_timeout`: the longest one try may run before Airflow stops it (Airflow's
      own setting; default: no limit): an app that never stops would otherwise hold back
      every later run.
    - `mode`: `available_now` (the above), or `continuous`: one long task that runs the
      app until it fails (`--continuous` is added to its `args`; `schedule` is
      `@continuous`, one active run); a failed try is retried after `restart_backoff`,
      doubling up to `max_restart_delay`, without end, so the app stays supervised. Its
      runs update no asset: `ackfold_reconcile` keeps its own schedule for it.
    """

    application: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    schedule: Schedule = "@hourly"
    owner: str = Field("ackfold", min_length=1)
    tags: tuple[str, ...] = ()
    execution_timeout: Duration | None = None
    mode: Literal["available_now", "continuous"] = "available_now"
    restart_backoff: Duration = timedelta(seconds=30)
    max_restart_delay: Duration = timedelta(minutes=10)


class OutputSetting(Section):
    """`apps.<app>.outputs[]`: an output table the app writes (`ackfold.effects`), besides
    those its `write_batch` calls declare: a sink's MERGE target, a producer's table
    outside Spark.

    - `path`: the table's location, as the app writes it (a path or a URI);
    - `origin_column`: the column holding each row's origin root id (`origin_root_id`);
    - `clean`: no dead letter may have rows there (a quality expectation).
    """

    path: str = Field(min_length=1)
    origin_column: str = Field("origin_root_id", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    clean: bool = False


class AppOverrides(Section):
    """An app's entry under `apps:`: any field left out falls back to `defaults:`."""

    timeout: Duration | None = None
    idle_timeout: Duration | None = None
    max_attempts: int | None = Field(None, ge=1, le=100)
    replay_backoff: Duration | None = None
    replay_rate: Rate | None = None
    source: Literal["sqs", "kafka"] | None = None
    source_queue: str | None = None
    # Where dead letters go; by default the queue's RedrivePolicy target, else <queue>-dlq.
    dead_letter_queue: str | None = None
    # Kafka: the topic replays go to, which the app reads besides source_queue; unset,
    # replays go back to source_queue.
    retry_queue: str | None = None
    stages: tuple[str, ...] = ()
    # The app's output tables, declared here (`ackfold.effects.outputs`).
    outputs: tuple[OutputSetting, ...] = ()
    quality: QualityOverrides | None = None
    alerts: AlertOverrides | None = None
    dag: AppDag | None = None
