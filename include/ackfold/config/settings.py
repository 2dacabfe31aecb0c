"""One configuration object for every ackfold entry point.

Settings come, highest priority first, from keyword arguments, environment variables
(`ACKFOLD_*`, nested with `__`: `ACKFOLD_SPARK__MASTER=spark://host:7077`), a YAML file
(`ACKFOLD_CONFIG`, or `ackfold.yaml` in the working directory), and the defaults below.

Example:
    >>> from ackfold.config import load_settings
    >>> settings = load_settings(spark={"master": "local[2]"})
    >>> settings.spark.master
    'local[2]'
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

ENV_PREFIX = "ACKFOLD_"
DEFAULT_CONFIG_FILE = "ackfold.yaml"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


class ConfigError(ValueError):
    """A setting is invalid. The message names the setting and how to set it."""


def _parse_duration(value: Any) -> Any:
    # Users write "90s", "5m", "1h"; a bare number means seconds.
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(
                f"{value!r} is not a duration: use a number of seconds or 90s, 5m, 1h, 2d"
            )
        return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    return value


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be positive")
    return value


Duration = Annotated[timedelta, BeforeValidator(_parse_duration), AfterValidator(_positive)]

_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|yarn|spark://[^\s]+|k8s://[^\s]+)$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SparkSettings(_Section):
    """Where and how Spark runs. One setting, `master`, switches local and cluster."""

    master: str = "local[*]"
    # The Python of PySpark's workers on the executors (`spark.pyspark.python`); unset,
    # this interpreter on local and spark:// masters (`ackfold.spark.worker_python`).
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


def _seconds(value: timedelta) -> str:
    return f"{value.total_seconds():g}s"


_SQS_LIMITS = {"wait_time": (20, "20s"), "visibility_timeout": (12 * 3600, "12h")}


class SqsSettings(_Section):
    """The SQS endpoint and how ackfold talks to it.

    Credentials come from boto3's standard chain, never from here.

    - `endpoint_url`: the SQS endpoint; the local ElasticMQ by default, None for AWS.
    - `region`: the AWS region of the queues.
    - `max_retries`: retries of a failed request after its first attempt (botocore's
      standard retry mode, with backoff).
    - `wait_time`: how long one receive waits for messages (SQS long poll, at most 20 s).
    - `visibility_timeout`: how long a received message stays hidden from other consumers
      before SQS delivers it again (1 s to 12 h); it must exceed `wait_time`.
    - `max_messages_per_batch`: the most messages one micro-batch takes from a queue.
    """

    endpoint_url: str | None = "http://127.0.0.1:9324"
    region: str = "us-east-1"
    max_retries: int = Field(5, ge=1, le=20)
    wait_time: Duration = timedelta(seconds=5)
    visibility_timeout: Duration = timedelta(seconds=120)
    max_messages_per_batch: int = Field(1000, ge=10, le=100_000)

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


class KafkaSettings(_Section):
    """Kafka as a source queue (apps with `source: kafka`).

    - `timeout`: how long a request to the brokers may take before ackfold says they are
      unreachable (a replay's re-read, a produce, a metadata lookup).
    - `store_payload`: also keep each record's value in `roots.payload`. A replay still
      re-reads the record; the copy is sent only once retention has deleted it.
    - `max_offsets_per_trigger`: records a tracked app's micro-batch takes at most.
    - `partitions`: of the topics that `ackfold kafka` and the demo create.
    """

    bootstrap_servers: str = "127.0.0.1:9092"
    timeout: Duration = timedelta(seconds=10)
    store_payload: bool = False
    max_offsets_per_trigger: int = Field(10_000, ge=1)
    partitions: int = Field(2, ge=1, le=1000)

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_ports(cls, value: str) -> str:
        for server in value.split(","):
            if not re.match(r"^[\w.\-\[\]:]+:\d{1,5}$", server.strip()):
                raise ValueError(f"{server!r} is not HOST:PORT (comma-separate several brokers)")
        return value


_PRESETS = ("@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly")
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-?LW#]+$")


def _schedule(value: str) -> str:
    # Airflow parses the cron itself; this catches the typos that would otherwise surface
    # as a DAG import error in the UI rather than at start-up.
    fields = value.split()
    if value in _PRESETS or (len(fields) == 5 and all(_CRON_FIELD.match(f) for f in fields)):
        return value
    raise ValueError(
        f"{value!r} is not a schedule: use a 5-field cron such as '*/5 * * * *' or one of "
        + ", ".join(_PRESETS)
    )


Schedule = Annotated[str, AfterValidator(_schedule)]


class AirflowSettings(_Section):
    """The embedded Airflow, and when ackfold's DAGs run.

    - `reconcile_schedule`: `ackfold_reconcile` (each successful run triggers
      `ackfold_replay` and `ackfold_quality`); a cron or a preset such as `@hourly`.
    - `maintenance_schedule`: `ackfold_maintenance` (OPTIMIZE, retention, VACUUM).
    """

    port: int = Field(8080, ge=1, le=65535)
    admin_user: str = Field("admin", min_length=1)
    reconcile_schedule: Schedule = "*/5 * * * *"
    maintenance_schedule: Schedule = "@daily"


class QualityThresholds(_Section):
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


class QualityOverrides(_Section):
    """An app's `quality:` entry: any field left out falls back to `defaults.quality`."""

    grace: Duration | None = None
    max_duplicate_rate: float | None = Field(None, ge=0, le=1)
    max_dead_letter_rate: float | None = Field(None, ge=0, le=1)
    latency_p99: Duration | None = None


class AppPolicy(_Section):
    """Per-app reliability policy: how long a root may take, and how often it is retried."""

    timeout: Duration = timedelta(minutes=5)
    idle_timeout: Duration | None = None
    max_attempts: int = Field(3, ge=1, le=100)
    # Attempt k+1 is sent no sooner than replay_backoff * 2**(k-1) after attempt k failed.
    replay_backoff: Duration = timedelta(seconds=30)
    # Messages per second an automatic replay sends back to the app's source queue.
    replay_rate: float = Field(50.0, gt=0, le=100_000)
    quality: QualityThresholds = QualityThresholds()


class AppOverrides(_Section):
    """An app's entry under `apps:`: any field left out falls back to `defaults:`."""

    timeout: Duration | None = None
    idle_timeout: Duration | None = None
    max_attempts: int | None = Field(None, ge=1, le=100)
    replay_backoff: Duration | None = None
    replay_rate: float | None = Field(None, gt=0, le=100_000)
    source: Literal["sqs", "kafka"] | None = None
    source_queue: str | None = None
    # Where dead letters go; by default the queue's RedrivePolicy target, else <queue>-dlq.
    dead_letter_queue: str | None = None
    # Kafka: the topic replays go to, which the app reads besides source_queue; unset,
    # replays go back to source_queue.
    retry_queue: str | None = None
    stages: tuple[str, ...] = ()
    quality: QualityOverrides | None = None


class FaultSettings(_Section):
    """Seeded fault injection for the demo app (`ackfold.demo.faults`). Empty: none.

    `drop` and `fail` map a stage to the fraction of its input tuples it silently drops
    (no ack: the root times out) or explicitly fails. `poison` messages are malformed and
    fail on every attempt. `stuck` messages meet an outage: they fail at the first stage
    on every automatic attempt, are dead-lettered, and go through when someone replays
    them by hand (from the UI or `ackfold replay`). `slow` makes a stage sleep once per
    micro-batch. `kill` names stages whose streaming query dies once, mid-batch (after its
    outputs, before its acks), and is restarted from its checkpoint.
    """

    seed: int = 0
    drop: dict[str, float] = Field(default_factory=dict)
    fail: dict[str, float] = Field(default_factory=dict)
    poison: int = Field(0, ge=0)
    stuck: int = Field(0, ge=0)
    slow: dict[str, Duration] = Field(default_factory=dict)
    kill: tuple[str, ...] = ()

    @field_validator("drop", "fail")
    @classmethod
    def _fractions(cls, value: dict[str, float]) -> dict[str, float]:
        for stage, fraction in value.items():
            if not 0 <= fraction < 1:
                raise ValueError(f"{stage}: a fraction must be at least 0 and below 1")
        return value

    def stages(self) -> set[str]:
        return {*self.drop, *self.fail, *self.slow, *self.kill}

    def describe(self) -> str:
        """One line for logs and reports, e.g. `seed 7: drop 5% at split, 3 poison`."""
        parts = [f"drop {f:.0%} at {s}" for s, f in self.drop.items() if f]
        parts += [f"fail {f:.0%} at {s}" for s, f in self.fail.items() if f]
        if self.poison:
            parts.append(f"{self.poison} poison")
        if self.stuck:
            parts.append(f"{self.stuck} stuck until replayed by hand")
        parts += [f"{s} slow by {d.total_seconds():g}s a batch" for s, d in self.slow.items()]
        parts += [f"{s} query killed once" for s in self.kill]
        return f"seed {self.seed}: " + (", ".join(parts) or "no faults")


class DemoSettings(_Section):
    """`ackfold demo` (and `make run`): the word-count app on SQS, fed from a bundled text.

    The demo app's own policy (timeout, attempts, backoff) is `apps.wordcount`, with
    defaults suited to a demo where unset (`DEMO_APP_POLICY`).
    """

    messages: int = Field(2000, ge=1, le=1_000_000)
    faults: FaultSettings = FaultSettings(
        seed=1, drop={"split": 0.05}, fail={"split": 0.02}, poison=3, stuck=2, kill=("count",)
    )
    # Reconcile-and-replay cycles before the demo gives up waiting for every root to settle.
    max_cycles: int = Field(30, ge=1)


class ReconcileSettings(_Section):
    """How far back a reconcile looks for the state of roots that get new events.

    Roots first seen longer ago than `lookback` are settled for all practical purposes;
    an event for one of them waits in `unmatched_events` instead of costing a scan of the
    whole history. Keep it well above every app's timeout.
    """

    lookback: Duration = timedelta(days=2)
    max_bytes_per_batch: str = Field("512m", pattern=r"^\d+[kmg]?$")


class ReplaySettings(_Section):
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


class UiSettings(_Section):
    """The Reliability UI (the Airflow plugin `plugins/ackfold_ui.py`).

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


class QualitySettings(_Section):
    """`ackfold quality` and `ackfold_quality`. Each app's thresholds are in its policy
    (`defaults.quality`, `apps.<app>.quality`).

    - `window`: the checks look at roots registered, and events written, this long before
      the run (their cost follows the window, not the ledger's history); by default
      `reconcile.lookback`, which outlasts every app's timeout.
    - `docs_dir`: where Data Docs are built (default `<var_dir>/quality/data_docs`); the
      Reliability UI serves them, behind the Airflow login.
    """

    window: Duration | None = None
    docs_dir: Path | None = None


class MaintenanceSettings(_Section):
    """What `ackfold_maintenance` keeps.

    - `retention`: the `ack_events` of a root that completed (or completed late) and has
      had no event for this long are deleted; its `roots` and `root_state` rows stay.
      Roots in any other status keep every event. It must exceed `reconcile.lookback`,
      so that no event a reconcile may still read is deleted.
    - `vacuum_retention`: VACUUM removes files unreferenced for this long. Delta refuses
      less than its 7-day default (a running stream or a reader may still need them).
    """

    retention: Duration = timedelta(days=30)
    vacuum_retention: Duration = timedelta(days=7)

    @field_validator("vacuum_retention")
    @classmethod
    def _delta_minimum(cls, value: timedelta) -> timedelta:
        if value < timedelta(days=7):
            raise ValueError(f"must be at least 7d (Delta's safety minimum), not {_seconds(value)}")
        return value


# The word-count demo app's policy (`ackfold.demo.wordcount`), part of the defaults so that
# the CLI, the DAGs and the demo all see it: short enough for the demo to settle in
# minutes, and five attempts so that a sentence the faults hit by chance is dead-lettered
# about once in half a million (0.07 ** 5), unlike a poison message.
DEMO_APP: Final = "wordcount"
DEMO_APP_POLICY: Final = AppOverrides(
    timeout=timedelta(seconds=10),
    max_attempts=5,
    replay_backoff=timedelta(milliseconds=200),
    replay_rate=1000.0,
    # The demo dead-letters its poison and stuck messages on purpose, and kills a query
    # mid-batch, which completes some replayed roots late; its first micro-batch takes in
    # every sentence at once, so the trees of that batch take tens of seconds.
    quality=QualityOverrides(
        max_duplicate_rate=0.05, max_dead_letter_rate=0.05, latency_p99=timedelta(minutes=2)
    ),
    source="sqs",
    source_queue="wordcount-sentences",
    stages=("split", "count"),
)


def with_app_defaults(
    apps: dict[str, AppOverrides], app: str = DEMO_APP, policy: AppOverrides = DEMO_APP_POLICY
) -> dict[str, AppOverrides]:
    """`apps` with `policy` filled in where `apps[app]` leaves a field unset."""
    mine = apps.get(app)
    merged = policy.model_dump(exclude_none=True)
    if mine is not None:
        own = mine.model_dump(exclude_none=True, exclude_defaults=True)
        quality = {**merged.get("quality", {}), **own.pop("quality", {})}
        merged.update(own, quality=quality or None)
    return {**apps, app: AppOverrides(**merged)}


class Settings(BaseSettings):
    """Every ackfold setting. Build it with `load_settings()`, which explains bad values."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    var_dir: Path = Path("var")
    warehouse: str | None = None
    jars_dir: Path | None = None
    airflow_home: Path | None = None
    spark: SparkSettings = SparkSettings()
    sqs: SqsSettings = SqsSettings()
    kafka: KafkaSettings = KafkaSettings()
    airflow: AirflowSettings = AirflowSettings()
    reconcile: ReconcileSettings = ReconcileSettings()
    replay: ReplaySettings = ReplaySettings()
    defaults: AppPolicy = AppPolicy()
    # Per-app policies. Unset, it holds the demo app `wordcount` (DEMO_APP_POLICY); an
    # `apps` of your own replaces it, and a `wordcount` entry in it is completed with the
    # demo's values where it leaves a field unset.
    apps: dict[str, AppOverrides] = Field(default_factory=dict, validate_default=True)
    demo: DemoSettings = DemoSettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    quality: QualitySettings = QualitySettings()

    @field_validator("apps")
    @classmethod
    def _demo_app_policy(cls, value: dict[str, AppOverrides]) -> dict[str, AppOverrides]:
        if value and DEMO_APP not in value:
            return value
        return with_app_defaults(value)

    @model_validator(mode="after")
    def _retention_outlasts_lookback(self) -> Settings:
        if self.maintenance.retention <= self.reconcile.lookback:
            raise ValueError(
                f"maintenance.retention ({self.maintenance.retention}) must exceed "
                f"reconcile.lookback ({self.reconcile.lookback}): a reconcile may still read "
                "events younger than the lookback"
            )
        return self

    ui: UiSettings = UiSettings()

    @model_validator(mode="after")
    def _lookback_covers_timeouts(self) -> Settings:
        # A root still open when its partition leaves the reconcile window is never
        # looked at again: every timeout must end well inside the window.
        policies = [self.defaults, *(self.app(name) for name in self.apps)]
        longest = max(p.timeout + (p.idle_timeout or timedelta(0)) for p in policies)
        if self.reconcile.lookback < longest + timedelta(days=1):
            raise ValueError(
                f"reconcile.lookback ({self.reconcile.lookback}) must exceed the longest app "
                f"timeout plus idle timeout ({longest}) by at least a day"
            )
        return self

    @model_validator(mode="after")
    def _quality_window_covers_timeouts(self) -> Settings:
        # A root is checked once its timeout and grace have passed: a shorter window would
        # check no root at all, and pass.
        if self.quality.window is None:
            quality = self.quality.model_copy(update={"window": self.reconcile.lookback})
            object.__setattr__(self, "quality", quality)
        assert self.quality.window is not None
        for name in ("defaults", *self.apps):
            policy = self.defaults if name == "defaults" else self.app(name)
            due = policy.timeout + policy.quality.grace
            if self.quality.window <= due:
                raise ValueError(
                    f"quality.window ({self.quality.window}) must exceed the timeout plus "
                    f"quality grace of {name} ({due}): no root would be old enough to check"
                )
        return self

    @model_validator(mode="after")
    def _absolute_paths(self) -> Settings:
        # Airflow tasks and spark-submit run elsewhere: resolve relative paths once, here.
        var = self.var_dir.expanduser().resolve()
        object.__setattr__(self, "var_dir", var)
        warehouse = self.warehouse or str(var / "warehouse")
        if "`" in warehouse:
            raise ValueError(f"warehouse {warehouse!r} must not contain a backtick")
        if "://" not in warehouse:
            warehouse = str(Path(warehouse).expanduser().resolve())
        object.__setattr__(self, "warehouse", warehouse)
        object.__setattr__(self, "jars_dir", (self.jars_dir or var / "jars").expanduser().resolve())
        home = self.airflow_home or var / "airflow"
        object.__setattr__(self, "airflow_home", home.expanduser().resolve())
        docs = self.quality.docs_dir or var / "quality" / "data_docs"
        quality = self.quality.model_copy(update={"docs_dir": docs.expanduser().resolve()})
        object.__setattr__(self, "quality", quality)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = config_file()
        if path is not None:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=path))
        return tuple(sources)

    def app(self, name: str) -> AppPolicy:
        """The policy of app `name`: its overrides on top of `defaults`.

        Unknown apps get the defaults: apps need not be declared to be tracked.
        """
        overrides = self.apps.get(name)
        if overrides is None:
            return self.defaults
        merged = self.defaults.model_dump()
        own = overrides.model_dump(include=set(AppPolicy.model_fields), exclude_none=True)
        merged.update(own, quality={**merged["quality"], **own.get("quality", {})})
        return AppPolicy(**merged)

    @property
    def table_root(self) -> str:
        assert self.warehouse is not None
        return self.warehouse.rstrip("/")


def config_file() -> Path | None:
    """The YAML file in force: `ACKFOLD_CONFIG` if set (it must exist), else ./ackfold.yaml."""
    named = os.environ.get(f"{ENV_PREFIX}CONFIG")
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise ConfigError(f"ACKFOLD_CONFIG names {path}, which is not a file")
        return path
    default = Path(DEFAULT_CONFIG_FILE)
    return default if default.is_file() else None


def _describe(loc: tuple[int | str, ...]) -> str:
    dotted = ".".join(str(part) for part in loc)
    env = ENV_PREFIX + "__".join(str(part) for part in loc).upper()
    return f"setting {dotted} (environment {env})"


def load_settings(**overrides: Any) -> Settings:
    """Load and validate the settings, or raise `ConfigError` naming each bad setting."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            loc = tuple(part for part in error["loc"] if not str(part).startswith("function-"))
            message = str(error["msg"]).removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "is not an ackfold setting (check the spelling)"
            lines.append(f"{_describe(loc)}: {message}" if loc else message)
        source = config_file()
        where = f"\nCheck the environment and {source}." if source else "\nCheck the environment."
        raise ConfigError(
            "Invalid ackfold configuration:\n  " + "\n  ".join(lines) + where
        ) from None
