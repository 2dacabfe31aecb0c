"""The settings of each part of ackfold: Spark, SQS, Kafka, Airflow, reconcile, replay, the
UI, the quality checks and maintenance (`Settings.spark`, `Settings.sqs`, ...)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    SecretStr,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from ackfold.config.values import Duration, Schedule, Section

_USER_NAME = re.compile(r"^[A-Za-z0-9_.@-]+$")


def _user_name(value: str) -> str:
    # Airflow's simple auth manager reads its users as "name:role,name:role".
    if not _USER_NAME.match(value):
        raise ValueError(f"{value!r} is not a user name: use letters, digits and _ . @ -")
    return value


UserName = Annotated[str, AfterValidator(_user_name)]
_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|yarn|spark://[^\s]+|k8s://[^\s]+)$")


_REMOTE = re.compile(r"^sc://[^/\s;]+(/.*)?$")
_TOKEN = re.compile(r"(?i)(token=)[^;]*")


def mask_token(url: str) -> str:
    """A Spark Connect URL with its token masked, for messages and `ackfold config`.

    Example:
        >>> mask_token("sc://spark.example.com:443/;use_ssl=true;token=abc123")
        'sc://spark.example.com:443/;use_ssl=true;token=***'
    """
    return _TOKEN.sub(r"\1***", url)


class SparkSettings(Section):
    """Where and how Spark runs. `master` switches local and cluster; `remote`, a Spark
    Connect endpoint (`sc://host:port/;token=...`), runs every Spark job of ackfold
    through Spark Connect instead (then `master`, `driver_memory` and the jars are the
    server's business)."""

    master: str = "local[*]"
    remote: str | None = None
    # The Python of PySpark's workers on the executors (`spark.pyspark.python`); unset,
    # this interpreter on local and spark:// masters (`ackfold.spark.python.worker_python`).
    python: str | None = Field(None, min_length=1)
    driver_memory: str = Field("2g", pattern=r"^\d+[kmgt]?$")
    shuffle_partitions: int = Field(4, ge=1)
    ui: bool = False
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("master")
    @classmethod
    def _known_master(cls, value: str) -> str:
        if not _MASTER.match(value):
            raise ValueError(
                f"{value!r} is not a Spark master: use local[*], local[N], spark://HOST:PORT, "
                "yarn or k8s://URL"
            )
        return value

    @field_validator("remote")
    @classmethod
    def _connect_url(cls, value: str | None) -> str | None:
        if value is not None and not _REMOTE.match(value):
            raise ValueError(
                f"{mask_token(value)!r} is not a Spark Connect URL: use sc://HOST:PORT, with "
                "parameters after a slash, e.g. sc://HOST:443/;use_ssl=true;token=TOKEN"
            )
        return value

    @field_serializer("remote")
    def _masked(self, value: str | None) -> str | None:
        return mask_token(value) if value is not None else None


def _seconds(value: timedelta) -> str:
    return f"{value.total_seconds():g}s"


_SQS_LIMITS = {"wait_time": (20, "20s"), "visibility_timeout": (12 * 3600, "12h")}


class SqsSettings(Section):
    """The SQS endpoint and how ackfold talks to it.

    Credentials come from boto3's standard chain, never from here.

    - `endpoint_url`: the SQS endpoint. Unset (the default), boto3 resolves AWS's own
      regional endpoint; the local stack (`ackfold up`, `ackfold demo`, `make run`) sets
      its ElasticMQ's, `http://127.0.0.1:9324`, itself. An empty value
      (`ACKFOLD_SQS__ENDPOINT_URL=`) unsets it.
    - `region`: the AWS region of the queues. Unset (the default), boto3's chain decides:
      `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's region. An empty value unsets it.
    - `max_retries`: retries of a failed request after its first attempt (botocore's
      standard retry mode, with backoff).
    - `wait_time`: how long one receive waits for messages (SQS long poll, at most 20 s).
    - `visibility_timeout`: how long a received message stays hidden from other consumers
      before SQS delivers it again (1 s to 12 h); it must exceed `wait_time`.
    - `max_messages_per_batch`: the most messages one micro-batch takes from a queue.
    """

    endpoint_url: str | None = None
    region: str | None = Field(None, pattern=r"^[a-z0-9-]{1,50}$")
    max_retries: int = Field(5, ge=1, le=20)
    wait_time: Duration = timedelta(seconds=5)
    visibility_timeout: Duration = timedelta(seconds=120)
    max_messages_per_batch: int = Field(1000, ge=10, le=100_000)

    @field_validator("endpoint_url", "region", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # An environment variable cannot be null: `ACKFOLD_SQS__ENDPOINT_URL=` overrides a
        # file's endpoint with boto3's own resolution.
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("endpoint_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @field_validator("wait_time", "visibility_timeout")
    @classmethod
    def _sqs_limits(cls, value: timedelta, info: ValidationInfo) -> timedelta:
        # SQS takes whole seconds within these limits: say so rather than round silently.
        high, label = _SQS_LIMITS[str(info.field_name)]
        seconds = value.total_seconds()
        if seconds != int(seconds) or not 1 <= seconds <= high:
            raise ValueError(
                f"must be a whole number of seconds from 1s to {label} (the SQS limit), "
                f"not {_seconds(value)}"
            )
        wait = info.data.get("wait_time")
        # A micro-batch may poll for wait_time after its first message arrived: a shorter
        # visibility timeout lets SQS redeliver messages the batch still holds.
        if info.field_name == "visibility_timeout" and wait is not None and value <= wait:
            raise ValueError(f"{_seconds(value)} must exceed sqs.wait_time ({_seconds(wait)})")
        return value


class KafkaSettings(Section):
    """Kafka as a source queue (apps with `source: kafka`).

    - `timeout`: how long a request to the brokers may take before ackfold says they are
      unreachable (a replay's re-read, a produce, a metadata lookup).
    - `store_payload`: also keep each record's value in `roots.payload`. A replay still
      re-reads the record; the copy is sent only once retention has deleted it.
    - `max_offsets_per_trigger`: records a tracked app's micro-batch takes at most.
    - `partitions`: of the topics that `ackfold kafka` and the demo create.
    - `security_protocol`, `sasl_mechanism`, `sasl_username`, `sasl_password`,
      `ssl_ca_location`: how the clients (confluent-kafka and Spark's Kafka source,
      `ackfold.sources.kafka_security`) authenticate and encrypt. The password comes from
      the environment (`ACKFOLD_KAFKA__SASL_PASSWORD`) or an Airflow connection
      (`airflow_connection`, for the DAGs' tasks), never from a file in the repository;
      it is never printed or logged.
    """

    bootstrap_servers: str = "127.0.0.1:9092"
    timeout: Duration = timedelta(seconds=10)
    store_payload: bool = False
    max_offsets_per_trigger: int = Field(10_000, ge=1)
    partitions: int = Field(2, ge=1, le=1000)
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = Field(None, min_length=1)
    sasl_password: SecretStr | None = None
    ssl_ca_location: Path | None = None
    airflow_connection: str | None = Field(None, pattern=r"^[A-Za-z0-9_.\-]{1,200}$")

    @model_validator(mode="after")
    def _security_is_complete(self) -> KafkaSettings:
        sasl = self.security_protocol.startswith("SASL_")
        if sasl and self.sasl_mechanism is None:
            raise ValueError(
                f"security_protocol {self.security_protocol} needs sasl_mechanism (PLAIN, "
                "SCRAM-SHA-256 or SCRAM-SHA-512; ACKFOLD_KAFKA__SASL_MECHANISM)"
            )
        if not sasl and (self.sasl_mechanism or self.sasl_username or self.sasl_password):
            raise ValueError(
                f"sasl_* settings need a SASL security_protocol (SASL_PLAINTEXT or SASL_SSL), "
                f"not {self.security_protocol}: set ACKFOLD_KAFKA__SECURITY_PROTOCOL"
            )
        if self.ssl_ca_location is not None and not self.security_protocol.endswith("SSL"):
            raise ValueError(
                f"ssl_ca_location needs an SSL security_protocol (SSL or SASL_SSL), not "
                f"{self.security_protocol}"
            )
        return self

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_ports(cls, value: str) -> str:
        for server in value.split(","):
            if not re.match(r"^[\w.\-\[\]:]+:\d{1,5}$", server.strip()):
                raise ValueError(f"{server!r} is not HOST:PORT (comma-separate several brokers)")
        return value


class AirflowSettings(Section):
    """The embedded Airflow, and when ackfold's DAGs run.

    - `admin_user`: the embedded Airflow's admin; `users`: more accounts, name -> role
      (Airflow's simple auth manager: `viewer` reads, `user` also triggers DAG runs such
      as a replay, `op` also edits connections and pools, `admin` everything). Each gets
      a password, made once and kept in `<airflow_home>/passwords.json`.
    - `reconcile_schedule`: `ackfold_reconcile` (each successful run triggers
      `ackfold_replay` and `ackfold_quality`); a cron or a preset such as `@hourly`.
    - `maintenance_schedule`: `ackfold_maintenance` (OPTIMIZE, retention, VACUUM).
    - `spark_connect_conn_id`: with `spark.remote` set, the Spark tasks run through Spark
      Connect, on the endpoint of this Airflow connection (type `spark_connect`: host,
      port, the token as its password), or on `spark.remote` itself without one.
    - `host`: the address `make run`'s api-server listens on: loopback only by default;
      `0.0.0.0` (every interface) lets other machines reach it, and its login.
    - `paused_at_creation`: whether ackfold's DAGs are paused when they first appear.
      Unset (the default), Airflow's own `[core] dags_are_paused_at_creation` decides, as
      for every other DAG of the deployment; `make run` sets it to false for its stack.
    """

    port: int = Field(8080, ge=1, le=65535)
    host: str = Field("127.0.0.1", pattern=r"^[A-Za-z0-9.:\-]{1,253}$")
    spark_connect_conn_id: str = Field("spark_connect_default", pattern=r"^[A-Za-z0-9_.-]+$")
    admin_user: UserName = "admin"
    users: dict[UserName, Literal["viewer", "user", "op", "admin"]] = Field(default_factory=dict)
    reconcile_schedule: Schedule = "*/5 * * * *"
    maintenance_schedule: Schedule = "@daily"
    paused_at_creation: bool | None = None

    @model_validator(mode="after")
    def _admin_is_not_listed_again(self) -> AirflowSettings:
        if self.admin_user in self.users:
            raise ValueError(
                f"users: {self.admin_user!r} is the admin_user already: give other names"
            )
        return self


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
            raise ValueError(f"must be at least 7d (Delta's safety minimum), not {_seconds(value)}")
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
