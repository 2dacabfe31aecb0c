"""How each part of ackfold runs: reconcile, the engine, replay, the UI, the quality
checks, maintenance, alerts and metrics (`Settings.reconcile`, `Settings.engine`, ...)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    field_validator,
)

from ackfold.config.values import Duration, Section, seconds_text


class ReconcileSettings(Section):
    """How far back a reconcile looks for the state of roots that get new events.

    Roots first seen longer ago than `lookback` are settled for all practical purposes;
    an event for one of them waits in `unmatched_events` instead of costing a scan of the
    whole history. Keep it well above every app's timeout.
    """

    lookback: Duration = timedelta(days=2)
    max_bytes_per_batch: str = Field("512m", pattern=r"^\d+[kmg]?$")


class EngineSettings(Section):
    """Which engine runs the jobs Airflow schedules: reconcile, replay planning, quality.

    - `embedded`: DuckDB in the calling process, over the tables as delta-rs reads them;
      no JVM, no cluster. Derived tables are committed by delta-rs.
    - `spark`: a Spark session (`spark.master`, or `spark.remote` for Connect): for
      ledgers larger than one machine, and teams that run everything on Spark.
    - another engine's name, once it is registered (`ackfold.engines.register`).
    - `auto` (the default): `spark` when `spark.remote` is set (the jobs then run on that
      Spark Connect server, which may be the only one that reaches the warehouse); else
      `embedded` wherever delta-rs reaches the warehouse (a local path, `file:`, `s3://`,
      `s3a://`, `gs://`, `abfss://`, `az://`), and `spark` elsewhere (`hdfs://`, ...).

    `memory_limit` caps a job's memory: DuckDB gets it less what the process holds when
    it connects (and less what the job needs beside it: `ackfold.embedded.duck.connect`),
    and spills to `<var_dir>/duckdb` beyond that; and
    `reconcile.max_bytes_per_batch` caps the parquet bytes of new events one slice folds:
    together they bound a reconcile's memory whatever the backlog.
    """

    # `auto`, or a registered engine's name: an unknown one is refused when a run chooses
    # its engine (`ackfold.engines.build`), which the settings cannot import.
    kind: str = Field("auto", pattern=r"^[a-z][a-z0-9_-]{0,39}$")
    memory_limit: str = Field("2GB", pattern=r"^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
    threads: int | None = Field(None, ge=1, le=256)


class ReplaySettings(Section):
    """How replays run. Each app's rate, backoff and attempts are in its policy."""

    # `ackfold replay` asks for --yes before sending more than this many messages.
    confirm_above: int = Field(100, ge=0)
    # An automatic replay sends at most this many; the next run sends the rest.
    max_per_run: int = Field(10_000, ge=1)
    # Messages sent between two marks in the replay log: a crash resends at most these.
    chunk: int = Field(1000, ge=10, le=100_000)
    # Rounds of sending a message the queue refused or could not be reached for.
    send_attempts: int = Field(3, ge=1, le=20)
    send_backoff: Duration = timedelta(seconds=1)


class UiSettings(Section):
    """The Reliability UI (the Airflow plugin `ackfold.airflow.plugin`).

    - `payload_preview_chars`: the most payload characters a root page shows (0: none).
    - `redact_keys`: JSON keys (any depth, case-insensitive) whose values are masked.
    - `redact_patterns`: regular expressions whose matches are masked anywhere in a payload
      preview, a fail reason or an event's reason.
    - `page_size`: roots per page of the tables, unless the user picks another size.
    - `replay_max_roots`: the most roots one replay from the UI sends, by id (the manual
      replay DAG takes at most 1000 ids).
    """

    payload_preview_chars: int = Field(500, ge=0, le=100_000)
    redact_keys: tuple[str, ...] = ("password", "secret", "token", "api_key", "authorization")
    redact_patterns: tuple[str, ...] = ()
    page_size: int = Field(50, ge=1, le=500)
    replay_max_roots: int = Field(1000, ge=1, le=1000)

    @field_validator("redact_patterns")
    @classmethod
    def _regexes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        return value


class QualitySettings(Section):
    """`ackfold quality` and `ackfold_quality`. Each app's thresholds are in its policy
    (`defaults.quality`, `apps.<app>.quality`).

    - `window`: the checks look at roots registered, and events written, this long before
      the run (their cost follows the window, not the ledger's history); by default
      `reconcile.lookback`, which outlasts every app's timeout.
    - `docs_dir`: where Data Docs are published (default `<var_dir>/quality/data_docs`):
      a symbolic link, swapped at each run to that run's site in `<docs_dir>.sites/`;
      the Reliability UI serves them, behind the Airflow login.
    - `docs_keep`: how many sites `<docs_dir>.sites/` keeps (the published one and the
      ones before it, for a reader still on them); older ones are deleted at each run.
    - `assets_dir`: the styles and scripts Data Docs use, fetched from npm by
      `make setup` (default `<var_dir>/quality/assets`) and written into every page, so
      the pages need no CDN.
    """

    window: Duration | None = None
    docs_dir: Path | None = None
    docs_keep: int = Field(default=3, ge=1, le=100)
    assets_dir: Path | None = None


class MaintenanceSettings(Section):
    """What `ackfold_maintenance` keeps.

    - `retention`: the `ack_events` of a root that completed (or completed late) and has
      had no event for this long are deleted; its `roots` and `root_state` rows stay.
      Roots in any other status keep every event. It must exceed `reconcile.lookback`,
      so that no event a reconcile may still read is deleted.
    - `vacuum_retention`: VACUUM removes files unreferenced for this long. Delta refuses
      less than its 7-day default (a running stream or a reader may still need them).
    - `progress_retention`: the apps' heartbeat rows (`app_progress`) older than this are
      deleted.
    """

    retention: Duration = timedelta(days=30)
    vacuum_retention: Duration = timedelta(days=7)
    progress_retention: Duration = timedelta(days=7)

    @field_validator("vacuum_retention")
    @classmethod
    def _delta_minimum(cls, value: timedelta) -> timedelta:
        if value < timedelta(days=7):
            raise ValueError(
                f"must be at least 7d (Delta's safety minimum), not {seconds_text(value)}"
            )
        return value


_EMAIL = re.compile(r"^[^@\s,;]+@[^@\s,;]+$")
_CONN_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,250}$")


class AlertSettings(Section):
    """Where alerts go (`ackfold.alerts`). What breaches is each app's policy
    (`defaults.alerts`, `apps.<app>.alerts`). Secrets stay in Airflow connections.

    - `window`: the failed, timed-out and dead-lettered roots, and the latency p99, count
      over this long before each evaluation: at least the reconcile interval.
    - `email_to`: recipients, through Airflow's SMTP provider (`SmtpNotifier`) on the
      connection `smtp_conn_id`; empty, no e-mail. `email_from`: the sender; unset, the
      connection's `from_email` extra.
    - `webhook_conn_id`: an Airflow connection whose password (or host) is a webhook URL
      that takes Slack-compatible JSON (`{"text": ...}`); unset, no webhook.
    - `ui_url`: the Reliability UI, for the links in messages; unset, Airflow's
      `[api] base_url` plus `/ackfold`, else `http://localhost:<airflow.port>/ackfold`.
    - `worst_roots`: root ids a message names per breach (ids only, never payloads).
    """

    window: Duration = timedelta(minutes=15)
    email_to: tuple[str, ...] = ()
    email_from: str | None = None
    smtp_conn_id: str = Field("smtp_default", pattern=_CONN_ID.pattern)
    webhook_conn_id: str | None = Field(None, pattern=_CONN_ID.pattern)
    webhook_timeout: Duration = timedelta(seconds=10)
    ui_url: str | None = None
    worst_roots: int = Field(10, ge=1, le=100)

    @field_validator("email_to")
    @classmethod
    def _addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for address in value:
            if not _EMAIL.match(address):
                raise ValueError(f"{address!r} is not an e-mail address (give a list)")
        return value

    @field_validator("ui_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value.rstrip("/") if value else value


class MetricsSettings(Section):
    """OpenTelemetry metrics of every reconcile and replay (`ackfold.metrics`), pushed over
    OTLP. Off unless an endpoint is set, here or in the standard environment variables.

    - `endpoint`: the OTLP base URL, e.g. `http://collector:4318` (`/v1/metrics` is added
      for OTLP/HTTP); unset, `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` or
      `OTEL_EXPORTER_OTLP_ENDPOINT`. Headers, timeout, TLS and compression come from the
      other `OTEL_EXPORTER_OTLP_*` variables.
    - `protocol`: `http/protobuf` or `grpc`; unset, `OTEL_EXPORTER_OTLP_METRICS_PROTOCOL`
      or `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`.
    - `enabled`: false turns them off even where those variables are set.
    - `service_name`: the `service.name` resource attribute, unless `OTEL_SERVICE_NAME`
      is set.
    """

    enabled: bool = True
    endpoint: str | None = None
    protocol: Literal["http/protobuf", "grpc"] | None = None
    service_name: str = Field("ackfold", min_length=1)

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value
