"""`Settings`, every ackfold setting in one object, and `load_settings`, which builds it
from its sources and explains bad values."""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from ackfold.config.connections import (
    AirflowSettings,
    KafkaSettings,
    SparkSettings,
    SqsSettings,
)
from ackfold.config.demo import DemoSettings
from ackfold.config.policy import AppOverrides, AppPolicy
from ackfold.config.sections import (
    AlertSettings,
    EngineSettings,
    MaintenanceSettings,
    MetricsSettings,
    QualitySettings,
    ReconcileSettings,
    ReplaySettings,
    UiSettings,
)
from ackfold.config.values import APP_NAME
from ackfold.errors import AckfoldError

ENV_PREFIX = "ACKFOLD_"
DEFAULT_CONFIG_FILE = "ackfold.yaml"


class ConfigError(AckfoldError, ValueError):
    """A setting is invalid. The message names the setting and how to set it."""


class Settings(BaseSettings):
    """Every ackfold setting. Build it with `load_settings()`, which explains bad values."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    # Where this host keeps its state (locks, DuckDB's spill, Data Docs, the jar cache):
    # under the Airflow home in a deployment, else the user's state directory; never the
    # directory a process happens to start in (`default_var_dir`).
    var_dir: Path = Field(default_factory=lambda: default_var_dir())
    warehouse: str | None = None
    jars_dir: Path | None = None
    airflow_home: Path | None = None
    spark: SparkSettings = SparkSettings()
    sqs: SqsSettings = SqsSettings()
    kafka: KafkaSettings = KafkaSettings()
    airflow: AirflowSettings = AirflowSettings()
    reconcile: ReconcileSettings = ReconcileSettings()
    engine: EngineSettings = EngineSettings()
    replay: ReplaySettings = ReplaySettings()
    defaults: AppPolicy = AppPolicy()
    # Per-app policies, empty unless configured. The demo registers its app `wordcount`
    # where it runs (its own processes, and those `make run` starts), not here.
    apps: dict[str, AppOverrides] = Field(default_factory=dict, validate_default=True)
    demo: DemoSettings = DemoSettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    quality: QualitySettings = QualitySettings()

    @model_validator(mode="after")
    def _retention_outlasts_lookback(self) -> Settings:
        if self.maintenance.retention <= self.reconcile.lookback:
            raise ValueError(
                f"maintenance.retention ({self.maintenance.retention}) must exceed "
                f"reconcile.lookback ({self.reconcile.lookback}): a reconcile may still read "
                "events younger than the lookback"
            )
        return self

    @model_validator(mode="after")
    def _retry_queues_have_their_source(self) -> Settings:
        # A root read from the retry topic dead-letters to the source topic's dead-letter
        # topic: without a source_queue it would go to <retry topic>-dlq, where nobody looks.
        for name, app in self.apps.items():
            if app.retry_queue is None:
                continue
            where = f"apps.{name}.retry_queue ({app.retry_queue!r})"
            if app.source not in (None, "kafka"):
                raise ValueError(
                    f"{where} is for Kafka sources; apps.{name}.source is {app.source}"
                )
            if not app.source_queue:
                raise ValueError(
                    f"{where} needs apps.{name}.source_queue: replays of the retry topic's "
                    "roots, and its dead letters, are routed by the source topic"
                )
            if app.retry_queue == app.source_queue:
                raise ValueError(f"{where} must differ from apps.{name}.source_queue")
        return self

    @model_validator(mode="after")
    def _app_dags_have_plain_names(self) -> Settings:
        for name, app in self.apps.items():
            if app.dag is not None and not APP_NAME.match(name):
                raise ValueError(
                    f"apps.{name}.dag: {name!r} cannot name a DAG (ackfold_app_<app>): use "
                    "letters, digits, '.', '_', '-'"
                )
        return self

    ui: UiSettings = UiSettings()
    alerts: AlertSettings = AlertSettings()
    metrics: MetricsSettings = MetricsSettings()

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
    def _a_deployment_names_its_warehouse(self) -> Settings:
        # In an Airflow deployment every component must fold one ledger: a default under
        # each host's own Airflow home would give each its own.
        home = airflow_home()
        if self.warehouse is None and "var_dir" not in self.model_fields_set and home:
            raise ValueError(
                f"warehouse is not set, and this process runs in the Airflow deployment at "
                f"{home}: set ACKFOLD_WAREHOUSE (or `warehouse:` in ackfold.yaml) to the "
                "ledger's location (s3://bucket/warehouse, a shared path), the same in every "
                "Airflow component; or set ACKFOLD_VAR_DIR to keep a warehouse on this host"
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
        docs = (self.quality.docs_dir or var / "quality" / "data_docs").expanduser()
        assets = (self.quality.assets_dir or var / "quality" / "assets").expanduser()
        # Not `docs.resolve()`: `docs_dir` is a link to the last run's site, and following
        # it would publish the next site inside that one (and so on, link after link).
        docs = docs.parent.resolve() / docs.name
        quality = self.quality.model_copy(update={"docs_dir": docs, "assets_dir": assets.resolve()})
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
        nested = {key: {**merged[key], **own.get(key, {})} for key in ("quality", "alerts")}
        merged.update(own, **nested)
        return AppPolicy(**merged)

    @property
    def table_root(self) -> str:
        assert self.warehouse is not None
        return self.warehouse.rstrip("/")


def airflow_home() -> Path | None:
    """The home of the Airflow deployment this process belongs to: `AIRFLOW_HOME`, or the
    home of the Airflow loaded in this process (a DAG file's, a task's, the api-server's),
    which is `~/airflow` when `AIRFLOW_HOME` is unset; None outside Airflow."""
    named = os.environ.get("AIRFLOW_HOME")
    if named:
        return Path(named).expanduser()
    loaded = getattr(sys.modules.get("airflow.configuration"), "AIRFLOW_HOME", None)
    return Path(loaded).expanduser() if loaded else None


def default_var_dir() -> Path:
    """`var_dir` when none is set: `<Airflow home>/ackfold` in a deployment
    (`airflow_home`), else `ackfold` in the user's state directory (`$XDG_STATE_HOME`,
    `~/.local/state` by default)."""
    home = airflow_home()
    if home is not None:
        return home / "ackfold"
    state = os.environ.get("XDG_STATE_HOME") or "~/.local/state"
    return Path(state).expanduser() / "ackfold"


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
