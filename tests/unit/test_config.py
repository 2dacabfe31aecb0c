import re
import sys
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from ackfold.config import ConfigError, load_settings

# Before `clean_env` replaces it (the tests' processes may have loaded Airflow).
from ackfold.config.settings import airflow_home as real_airflow_home

pytestmark = pytest.mark.usefixtures("clean_env")


def test_defaults_live_in_the_users_state_directory_and_run_local(tmp_path: Path) -> None:
    settings = load_settings()
    # Never the working directory (tmp_path here): the user's state directory.
    state = tmp_path / "state" / "ackfold"
    assert settings.var_dir == state
    assert settings.warehouse == str(state / "warehouse")
    assert settings.airflow_home == state / "airflow"
    assert settings.spark.master == "local[*]"
    assert settings.defaults.timeout == timedelta(minutes=5)


def test_in_an_airflow_deployment_state_goes_under_its_home_and_the_warehouse_is_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "airflow"
    monkeypatch.setattr("ackfold.config.settings.airflow_home", lambda: home)
    with pytest.raises(ConfigError, match=r"warehouse is not set.*ACKFOLD_WAREHOUSE"):
        load_settings()
    monkeypatch.setenv("ACKFOLD_WAREHOUSE", "s3://bucket/warehouse")
    settings = load_settings()
    assert settings.var_dir == home / "ackfold"
    assert settings.warehouse == "s3://bucket/warehouse"
    # A var dir set by hand keeps its warehouse under it, as `make run` does.
    monkeypatch.delenv("ACKFOLD_WAREHOUSE")
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    assert load_settings().warehouse == str(tmp_path / "var" / "warehouse")


def test_the_deployment_is_airflow_home_or_the_airflow_loaded_in_this_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "airflow.configuration", None)
    assert real_airflow_home() is None
    # A DAG file's or a task's process: Airflow is loaded, with its default home.
    loaded = SimpleNamespace(AIRFLOW_HOME=str(tmp_path / "default-home"))
    monkeypatch.setitem(sys.modules, "airflow.configuration", loaded)
    assert real_airflow_home() == tmp_path / "default-home"
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "named"))
    assert real_airflow_home() == tmp_path / "named"


def test_environment_overrides_nested_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACKFOLD_SPARK__MASTER", "spark://10.0.0.5:7077")
    monkeypatch.setenv("ACKFOLD_DEFAULTS__TIMEOUT", "90s")
    monkeypatch.setenv("ACKFOLD_WAREHOUSE", "s3a://bucket/ledger")
    settings = load_settings()
    assert settings.spark.master == "spark://10.0.0.5:7077"
    assert settings.defaults.timeout == timedelta(seconds=90)
    assert settings.warehouse == "s3a://bucket/ledger"


def test_yaml_file_sets_per_app_policy_on_top_of_defaults(tmp_path: Path) -> None:
    (tmp_path / "ackfold.yaml").write_text(
        "defaults: {timeout: 10m, max_attempts: 4}\n"
        "apps:\n  orders: {timeout: 1m, idle_timeout: 20s}\n"
    )
    settings = load_settings()
    policy = settings.app("orders")
    assert policy.timeout == timedelta(minutes=1)
    assert policy.idle_timeout == timedelta(seconds=20)
    assert policy.max_attempts == 4
    assert settings.app("other").timeout == timedelta(minutes=10)


def test_no_setting_names_the_demo_app_even_where_it_ran(tmp_path: Path) -> None:
    from ackfold.config.demo import DEMO_APP_POLICY
    from ackfold.demo.run import write_status
    from ackfold.demo.wordcount import with_demo_policy

    settings = load_settings(var_dir=tmp_path)
    assert settings.apps == {}
    # The demo's status in the var dir (what `ackfold status` reads) registers nothing: the
    # demo registers its app where it runs, in its own processes (and `make run` in those
    # it starts, through their environment).
    write_status(settings, "wordcount", phase="sending")
    assert load_settings(var_dir=tmp_path).apps == {}
    mine = with_demo_policy(settings)
    assert mine.apps["wordcount"] == DEMO_APP_POLICY
    assert (mine.app("wordcount").timeout, mine.app("wordcount").max_attempts) == (
        timedelta(seconds=10), 5
    )  # fmt: skip


def test_a_wordcount_entry_overrides_the_demo_policy_field_by_field(tmp_path: Path) -> None:
    from ackfold.demo.wordcount import with_demo_policy

    (tmp_path / "ackfold.yaml").write_text(
        "defaults: {max_attempts: 2}\n"
        "apps:\n  wordcount: {timeout: 1m, idle_timeout: 20s}\n  orders: {}\n"
    )
    settings = load_settings()
    # The settings take `wordcount` as any app: its entry on top of `defaults`.
    assert settings.app("wordcount").max_attempts == 2
    assert settings.apps["wordcount"].source_queue is None
    # Where the demo runs, its policy fills what the entry leaves unset.
    demo = with_demo_policy(settings)
    policy = demo.app("wordcount")
    assert policy.timeout == timedelta(minutes=1)
    assert policy.idle_timeout == timedelta(seconds=20)
    assert policy.max_attempts == 5, "the demo's, not defaults.max_attempts"
    assert demo.apps["wordcount"].source_queue == "wordcount-sentences"
    assert demo.app("orders").max_attempts == 2
    # It applies the policy to another app name too.
    assert with_demo_policy(settings, "wc2").app("wc2").max_attempts == 5


def test_apps_of_your_own_replace_the_demo_app(tmp_path: Path) -> None:
    (tmp_path / "ackfold.yaml").write_text("apps:\n  orders: {timeout: 2m}\n")
    settings = load_settings()
    assert list(settings.apps) == ["orders"]
    assert settings.app("orders").timeout == timedelta(minutes=2)


def test_environment_beats_the_yaml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ackfold.yaml").write_text("spark: {master: 'local[1]'}\n")
    monkeypatch.setenv("ACKFOLD_SPARK__MASTER", "local[2]")
    assert load_settings().spark.master == "local[2]"


@pytest.mark.parametrize(
    ("env", "value", "named"),
    [
        (
            "ACKFOLD_SPARK__MASTER",
            "mesos://nope",
            "spark.master (environment ACKFOLD_SPARK__MASTER)",
        ),
        ("ACKFOLD_SPARK__DRIVER_MEMORY", "lots", "spark.driver_memory"),
        ("ACKFOLD_SPARK__SHUFFLE_PARTITIONS", "0", "spark.shuffle_partitions"),
        ("ACKFOLD_DEFAULTS__TIMEOUT", "soon", "defaults.timeout"),
        ("ACKFOLD_DEFAULTS__TIMEOUT", "-5", "defaults.timeout"),
        ("ACKFOLD_DEFAULTS__MAX_ATTEMPTS", "0", "defaults.max_attempts"),
        ("ACKFOLD_SQS__ENDPOINT_URL", "localhost:9324", "sqs.endpoint_url"),
        ("ACKFOLD_KAFKA__BOOTSTRAP_SERVERS", "broker-without-port", "kafka.bootstrap_servers"),
        ("ACKFOLD_AIRFLOW__PORT", "70000", "airflow.port"),
        ("ACKFOLD_AIRFLOW__RECONCILE_SCHEDULE", "every 5 min", "airflow.reconcile_schedule"),
        ("ACKFOLD_AIRFLOW__MAINTENANCE_SCHEDULE", "@sometimes", "airflow.maintenance_schedule"),
        ("ACKFOLD_MAINTENANCE__RETENTION", "0", "maintenance.retention"),
        ("ACKFOLD_MAINTENANCE__VACUUM_RETENTION", "1d", "maintenance.vacuum_retention"),
        ("ACKFOLD_MAINTENANCE__RETENTION", "1d", "must exceed reconcile.lookback"),
        ("ACKFOLD_AIRFLOW__USERS", '{"vic": "boss"}', "airflow.users.vic"),
        ("ACKFOLD_AIRFLOW__USERS", '{"a,b": "viewer"}', "is not a user name"),
        ("ACKFOLD_AIRFLOW__USERS", '{"admin": "viewer"}', "'admin' is the admin_user already"),
        # The range of `ackfold replay --rate` and the manual replay's `rate`.
        (
            "ACKFOLD_DEFAULTS__REPLAY_RATE",
            "1e-320",
            "defaults.replay_rate (environment ACKFOLD_DEFAULTS__REPLAY_RATE): must be from "
            "0.1 to 100,000 messages per second, got 1e-320",
        ),
        (
            "ACKFOLD_APPS__WORDCOUNT__REPLAY_RATE",
            "200000",
            "apps.wordcount.replay_rate (environment ACKFOLD_APPS__WORDCOUNT__REPLAY_RATE): "
            "must be from 0.1 to 100,000",
        ),
    ],
)
def test_each_invalid_setting_is_named_in_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, named: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as error:
        load_settings()
    message = str(error.value)
    assert named in message
    assert "Traceback" not in message


def test_a_misspelled_setting_in_the_file_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "ackfold.yaml").write_text("sprak: {master: 'local[1]'}\n")
    with pytest.raises(ConfigError, match=r"setting sprak .* is not an ackfold setting"):
        load_settings()


def test_bad_app_policy_names_the_app(tmp_path: Path) -> None:
    (tmp_path / "ackfold.yaml").write_text("apps:\n  wordcount: {max_attempts: 0}\n")
    with pytest.raises(ConfigError, match=r"apps\.wordcount\.max_attempts"):
        load_settings()


def test_a_named_config_file_must_exist(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACKFOLD_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="ACKFOLD_CONFIG names .*missing.yaml"):
        load_settings()


def test_the_reconcile_lookback_must_outlast_every_timeout(tmp_path: Path) -> None:
    (tmp_path / "ackfold.yaml").write_text("apps:\n  slow: {timeout: 3d}\n")
    with pytest.raises(ConfigError, match=r"reconcile.lookback .* must exceed the longest"):
        load_settings()
    (tmp_path / "ackfold.yaml").write_text(
        "apps:\n  slow: {timeout: 3d}\nreconcile: {lookback: 5d}\n"
    )
    assert load_settings().app("slow").timeout.days == 3


def test_a_per_app_timeout_must_be_positive(tmp_path: Path) -> None:
    (tmp_path / "ackfold.yaml").write_text("apps:\n  x: {timeout: 0}\n")
    with pytest.raises(ConfigError, match=r"apps\.x\.timeout"):
        load_settings()


def test_dag_schedules_and_retention_have_defaults_and_take_crons(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = load_settings()
    assert settings.airflow.reconcile_schedule == "*/5 * * * *"
    assert settings.airflow.maintenance_schedule == "@daily"
    assert settings.maintenance.retention == timedelta(days=30)
    assert settings.maintenance.vacuum_retention == timedelta(days=7)
    monkeypatch.setenv("ACKFOLD_AIRFLOW__RECONCILE_SCHEDULE", "0,30 * * * 1-5")
    assert load_settings().airflow.reconcile_schedule == "0,30 * * * 1-5"


@pytest.mark.parametrize(
    ("app", "error"),
    [
        (
            {"source": "kafka", "retry_queue": "orders-retry"},
            "apps.orders.retry_queue ('orders-retry') needs apps.orders.source_queue",
        ),
        (
            {"source": "sqs", "source_queue": "orders", "retry_queue": "orders-retry"},
            "apps.orders.retry_queue ('orders-retry') is for Kafka sources",
        ),
        (
            {"source": "kafka", "source_queue": "orders", "retry_queue": "orders"},
            "apps.orders.retry_queue ('orders') must differ from apps.orders.source_queue",
        ),
    ],
)
def test_a_retry_queue_that_would_misroute_dead_letters_is_refused(
    app: dict[str, str], error: str
) -> None:
    """Dead letters of a root read from the retry topic go to the source topic's
    dead-letter topic: a retry topic without its source would send them elsewhere."""
    with pytest.raises(ConfigError, match=re.escape(error)):
        load_settings(apps={"orders": app})
    fine = {"source": "kafka", "source_queue": "orders", "retry_queue": "orders-retry"}
    assert load_settings(apps={"orders": fine}).apps["orders"].retry_queue == "orders-retry"


def test_an_app_dag_takes_its_defaults(tmp_path: Path) -> None:
    (tmp_path / "ackfold.yaml").write_text(
        "apps:\n  orders:\n    timeout: 1m\n    dag: {application: apps/orders.py}\n"
    )
    settings = load_settings()
    dag = settings.apps["orders"].dag
    assert dag is not None
    assert (dag.application, dag.args, dag.schedule, dag.owner, dag.tags) == (
        "apps/orders.py", (), "@hourly", "ackfold", (),
    )  # fmt: skip
    assert dag.execution_timeout is None
    assert settings.app("orders").timeout == timedelta(minutes=1), "the policy is as before"


@pytest.mark.parametrize(
    ("dag", "error"),
    [
        ({"application": "a.py", "schedule": "every hour"}, r"schedule .*'every hour' is not a"),
        ({"schedule": "@daily"}, r"application .*Field required"),
        ({"application": "a.py", "scheduel": "@daily"}, r"scheduel .*is not an ackfold setting"),
    ],
)  # fmt: skip
def test_a_bad_app_dag_field_is_named(dag: dict[str, str], error: str) -> None:
    with pytest.raises(ConfigError, match=r"setting apps\.orders\.dag\." + error):
        load_settings(apps={"orders": {"dag": dag}})


def test_an_app_with_a_dag_needs_a_name_a_dag_id_can_hold() -> None:
    with pytest.raises(ConfigError, match=r"apps\.my orders\.dag: 'my orders' cannot name a DAG"):
        load_settings(apps={"my orders": {"dag": {"application": "a.py"}}})
    assert load_settings(apps={"my orders": {"timeout": "1m"}}).apps["my orders"].dag is None
