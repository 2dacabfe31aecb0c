"""The embedded Airflow's environment and accounts, and where it listens: what every
process of `make run`'s stack (`ackfold_dev.stack`) is started with.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from ackfold.config import Settings
from ackfold.config.hosts import is_loopback_host
from ackfold.spark.session import on_loopback
from ackfold_dev import PROJECT_DIR

SIMPLE_AUTH_MANAGER = (
    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
)
# What a bind to every interface is written as: named, never bound, here.
_WILDCARDS = ("0.0.0.0", "::", "")  # noqa: S104


def listen_address(settings: Settings) -> str:
    """Where the api-server listens, as a person reads it.

    Example:
        >>> from ackfold.config import load_settings
        >>> listen_address(load_settings(airflow={"port": 8080}))
        '127.0.0.1:8080 (this machine only; airflow.host widens it)'
        >>> listen_address(load_settings(airflow={"host": "0.0.0.0", "port": 8080}))
        '0.0.0.0:8080 (every interface: other machines reach the login page)'
    """
    host, port = settings.airflow.host, settings.airflow.port
    if host in _WILDCARDS:
        every = host or "0.0.0.0"  # noqa: S104 - named, not bound
        return f"{every}:{port} (every interface: other machines reach the login page)"
    if is_loopback_host(host):
        return f"{host}:{port} (this machine only; airflow.host widens it)"
    return f"{host}:{port}"


def airflow_url(settings: Settings) -> str:
    """The address a browser or a task on this machine opens Airflow at."""
    host = settings.airflow.host
    if host in _WILDCARDS or is_loopback_host(host):
        host = "localhost"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.airflow.port}"


def local_api_url(settings: Settings) -> str:
    """The api-server's address for this machine's own calls (tasks, the health check):
    an address it listens on, never a name that may resolve to another family first."""
    host = settings.airflow.host
    if host in _WILDCARDS or host == "localhost":
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.airflow.port}"


def airflow_users(settings: Settings) -> dict[str, str]:
    """The embedded Airflow's accounts, name -> role: the admin, then `airflow.users`."""
    return {settings.airflow.admin_user: "admin", **settings.airflow.users}


def user_passwords(settings: Settings) -> dict[str, str]:
    """The password of every account of `airflow_users`, made once each and kept in
    Airflow's simple-auth-manager passwords file (readable by its owner only)."""
    path = passwords_file(settings)
    kept: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
    wanted = airflow_users(settings)
    missing = [name for name in wanted if name not in kept]
    if missing:
        kept.update({name: secrets.token_urlsafe(12) for name in missing})
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(kept) + "\n")
    return {name: kept[name] for name in wanted}


def keep_private(path: Path) -> None:
    """Make `path` readable by its owner only, creating it empty if it is not there: the
    metadata database holds Airflow's connections, variables and users' tokens, and SQLite
    gives its journal files the database's own mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    path.chmod(0o600)


def metadata_database(env: Mapping[str, str], home: Path) -> Path | None:
    """The SQLite file of Airflow's metadata database for the environment `env`: in its
    `AIRFLOW_HOME` (else `home`), `airflow.db`, unless `AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`
    says otherwise; None for another database.

    Example:
        >>> metadata_database({"AIRFLOW_HOME": "/srv/airflow"}, Path("var/airflow"))
        PosixPath('/srv/airflow/airflow.db')
        >>> metadata_database({"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://db/af"}, Path())
    """
    conn = env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
    if conn is None:
        return Path(env.get("AIRFLOW_HOME") or home) / "airflow.db"
    prefix = "sqlite:///"
    return Path(conn.removeprefix(prefix).split("?")[0]) if conn.startswith(prefix) else None


def passwords_file(settings: Settings) -> Path:
    assert settings.airflow_home is not None
    return settings.airflow_home / "passwords.json"


def airflow_parallelism(cores: int | None) -> int:
    """How many tasks the embedded Airflow runs at once on a machine of `cores` cores:
    twice the cores (a task mostly waits on Spark or on a queue), at least 4, at most
    Airflow's own default of 32. The LocalExecutor forks that many workers at its start,
    whatever the load: 32 of them took 2.6 GB on a 2-core machine.

    Example:
        >>> airflow_parallelism(2), airflow_parallelism(8), airflow_parallelism(64)
        (4, 16, 32)
    """
    return min(32, max(4, 2 * (cores or 1)))


def airflow_environment(
    settings: Settings, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment for every Airflow process of the embedded stack. A setting of
    Airflow's own given in the environment (`AIRFLOW__CORE__PARALLELISM`) wins over the
    stack's sizing."""
    env = dict(os.environ if base is None else base)
    env.setdefault("AIRFLOW__CORE__PARALLELISM", str(airflow_parallelism(os.cpu_count())))
    venv_bin = str(Path(sys.executable).parent)
    port = settings.airflow.port
    env.update(
        {
            # `airflow standalone` spawns `airflow`; spark-submit must be the venv's too.
            "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
            "AIRFLOW_HOME": str(settings.airflow_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_DIR / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(
                f"{name}:{role}" for name, role in airflow_users(settings).items()
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file(settings)),
            # What `airflow standalone` forces; set here, as the stack runs each component.
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__API__HOST": settings.airflow.host,
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": airflow_url(settings),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{local_api_url(settings)}/execution/",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            # The stack's own DAGs run from the start (the demo waits on them); a team's
            # Airflow keeps its own `dags_are_paused_at_creation`.
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "GX_ANALYTICS_ENABLED": "false",
            # Tasks and spark-submit read the same settings as this process.
            "ACKFOLD_VAR_DIR": str(settings.var_dir),
            "ACKFOLD_WAREHOUSE": str(settings.warehouse),
            "ACKFOLD_JARS_DIR": str(settings.jars_dir),
            "ACKFOLD_AIRFLOW_HOME": str(settings.airflow_home),
        }
    )
    if on_loopback(settings.spark.master):
        # Drivers on loopback only; one that a remote cluster's executors must reach
        # cannot be.
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def demo_app_env(settings: Settings) -> dict[str, str]:
    """The environment that registers the demo's word count in every process `make run`
    starts (Airflow's components, the demo itself): the app's policy (`DEMO_APP_POLICY`,
    where `apps.wordcount` of the configuration leaves a field unset), with its DAG
    (`DEMO_APP_DAG`) unless the configuration gives it one. The settings know nothing of the
    demo: it is registered where it runs, here and in its own processes (`with_demo_policy`).

    Example:
        >>> from ackfold.config import load_settings
        >>> env = demo_app_env(load_settings())
        >>> list(env), json.loads(env["ACKFOLD_APPS__WORDCOUNT"])["timeout"]
        (['ACKFOLD_APPS__WORDCOUNT'], '10s')
    """
    from ackfold.config.demo import DEMO_APP, DEMO_APP_DAG
    from ackfold.demo.wordcount import with_demo_policy
    from ackfold.jobs import app_path

    policy = with_demo_policy(settings).apps[DEMO_APP]
    if policy.dag is None:
        # The packaged entry point, wherever the package is installed.
        application = str(app_path(DEMO_APP_DAG.application))
        policy = policy.model_copy(
            update={"dag": DEMO_APP_DAG.model_copy(update={"application": application})}
        )
    value = json.dumps(policy.model_dump(exclude_none=True), default=_in_settings_form)
    return {f"ACKFOLD_APPS__{DEMO_APP.upper()}": value}


def _in_settings_form(value: object) -> str:
    # A duration as the settings read it back (`Duration`: "90s"), not as ISO 8601.
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s"
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
