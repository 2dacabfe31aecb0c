"""The embedded stack behind `make run`: `airflow standalone` with ackfold's DAGs and plugin.

Every process the stack starts runs in a process group of its own and carries a marker in
its environment. Stopping the stack stops each group, then any marked process that left
its group: Ctrl-C leaves nothing running.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from ackfold.config import Settings
from ackfold.dags import (
    LEDGER_POOL,
    LEDGER_POOL_DESCRIPTION,
    PROJECT_DIR,
)
from ackfold.local.elasticmq import ElasticMQ, ElasticMQError
from ackfold.local.ports import is_loopback_host
from ackfold.local.server import LocalServer
from ackfold.spark import on_loopback
from ackfold.spark_tasks import SPARK_CONN_ID, spark_connect_connection, spark_connection

if TYPE_CHECKING:
    from ackfold.local.kafka_broker import KafkaBroker

MARKER = "ACKFOLD_STACK_ID"


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


def passwords_file(settings: Settings) -> Path:
    assert settings.airflow_home is not None
    return settings.airflow_home / "passwords.json"


def airflow_environment(
    settings: Settings, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment for every Airflow process of the embedded stack."""
    env = dict(os.environ if base is None else base)
    venv_bin = str(Path(sys.executable).parent)
    port = settings.airflow.port
    env.update(
        {
            # `airflow standalone` spawns `airflow`; spark-submit must be the venv's too.
            "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
            "AIRFLOW_HOME": str(settings.airflow_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_DIR / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_DIR / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(
                f"{name}:{role}" for name, role in airflow_users(settings).items()
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file(settings)),
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://localhost:{port}/execution/",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
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


def demo_app_dag_env(settings: Settings) -> dict[str, str]:
    """The environment that gives the demo's word count its DAG under `make run`
    (`DEMO_APP_DAG`), unless the configuration already gives it one."""
    from ackfold.config.demo import DEMO_APP, DEMO_APP_DAG
    from ackfold.demo.wordcount import with_demo_policy

    if with_demo_policy(settings).apps[DEMO_APP].dag is not None:
        return {}
    name = f"ACKFOLD_APPS__{DEMO_APP.upper()}__DAG"
    return {name: DEMO_APP_DAG.model_dump_json(exclude_defaults=True)}


def _airflow(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), *args],
        env=dict(env), capture_output=True, text=True, check=False,
    )  # fmt: skip


def prepare_airflow(settings: Settings, env: Mapping[str, str], log: Callable[[str], None]) -> None:
    """Migrate the metadata database; create the ledger's pool (one slot); create
    `spark_default`, or point it at `spark.master` if it targets another master; with
    `spark.remote` set, the same for the Spark Connect connection the tasks take their
    endpoint from."""
    log("migrating the Airflow metadata database ...")
    result = _airflow(env, "db", "migrate")
    if result.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{result.stderr[-2000:]}")
    # Idempotent; without the pool the writers' tasks would never be scheduled.
    result = _airflow(env, "pools", "set", LEDGER_POOL, "1", LEDGER_POOL_DESCRIPTION)
    if result.returncode != 0:
        raise RuntimeError(f"could not create the pool {LEDGER_POOL}:\n{result.stderr[-2000:]}")
    _ensure_connection(env, SPARK_CONN_ID, spark_connection(settings), "spark.master", log)
    if settings.spark.remote:
        connection = spark_connect_connection(settings.spark.remote)
        conn_id = settings.airflow.spark_connect_conn_id
        _ensure_connection(env, conn_id, connection, "spark.remote", log)


def _ensure_connection(
    env: Mapping[str, str],
    conn_id: str,
    wanted: dict[str, Any],
    setting: str,
    log: Callable[[str], None],
) -> None:
    """Create connection `conn_id` as `wanted` (from `setting`), or replace it if it points
    elsewhere: the settings are the one switch (a connection made for an earlier run
    follows them)."""
    current = _airflow(env, "connections", "get", conn_id, "-o", "json")
    host = None
    if current.returncode == 0:
        with contextlib.suppress(ValueError, IndexError, AttributeError):
            found = json.loads(current.stdout)[0]
            host = found.get("host")
            keys = ("host", "port", "login", "password")
            if all(found.get(k) == wanted.get(k) for k in keys):
                return
        _airflow(env, "connections", "delete", conn_id)
    result = _airflow(env, "connections", "add", conn_id, "--conn-json", json.dumps(wanted))
    if result.returncode != 0:
        raise RuntimeError(f"could not create {conn_id}:\n{result.stderr[-2000:]}")
    where = wanted["host"] + (f":{wanted['port']}" if wanted.get("port") else "")
    if current.returncode == 0:
        log(f"pointed connection {conn_id} at {setting}: {host} -> {where}")
    else:
        log(f"created connection {conn_id} -> {where}")


def wait_healthy(url: str, timeout: float, alive: Callable[[], bool]) -> None:
    """Poll `url` until it answers 200, the process dies, or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("the process exited before it became healthy")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback)
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


class Supervisor:
    """Starts processes in their own groups, tagged with one marker; stops them all."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(
        self, argv: list[str], env: Mapping[str, str], out: IO[bytes] | int | None
    ) -> subprocess.Popen[bytes]:
        tagged = {**env, MARKER: self.token}
        proc = subprocess.Popen(
            argv, env=tagged, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.processes.append(proc)
        return proc

    def marked_pids(self) -> list[int]:
        """Live processes carrying this supervisor's marker, wherever their group is."""
        needle = f"{MARKER}={self.token}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def stop(self, grace: float = 20.0) -> None:
        for proc in self.processes:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self.marked_pids():
            time.sleep(0.5)
        for pid in self.marked_pids():
            _signal(pid, signal.SIGKILL)
        for proc in self.processes:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _say(message: str) -> None:
    # Flushed at once: `make run | tee` and tests read these lines while the stack runs.
    print(message, flush=True)


def start_sqs(settings: Settings, log: Callable[[str], None]) -> ElasticMQ | None:
    """Start ElasticMQ for a loopback `sqs.endpoint_url`; None if SQS is elsewhere, or if
    a server already answers there (`make sqs` in another terminal)."""
    from ackfold.sources.sqs_client import is_loopback, sqs_client

    if not is_loopback(settings.sqs.endpoint_url):
        log(f"SQS: using {settings.sqs.endpoint_url or 'AWS'} (not started here)")
        return None
    server = ElasticMQ(settings)
    try:
        server.start()
    except ElasticMQError:
        with contextlib.suppress(Exception):
            sqs_client(settings).list_queues()
            log(f"SQS: using the server already running on {settings.sqs.endpoint_url}")
            return None
        raise
    log(f"started ElasticMQ (SQS) on {server.endpoint_url} (log: {server.log_file})")
    return server


def start_kafka(settings: Settings, log: Callable[[str], None]) -> KafkaBroker | None:
    """Start the local Kafka broker for loopback `kafka.bootstrap_servers`; None if Kafka
    is elsewhere, or if a broker already answers there (`make kafka` in another terminal)."""
    from ackfold.local.kafka_broker import KafkaBroker, KafkaBrokerError
    from ackfold.sources.base import SourceError
    from ackfold.sources.kafka_client import existing_topics

    servers = settings.kafka.bootstrap_servers
    if not is_loopback_host(servers.split(",")[0].rpartition(":")[0]):
        log(f"Kafka: using {servers} (not started here)")
        return None
    broker = KafkaBroker(settings)
    try:
        broker.start()
    except KafkaBrokerError:
        with contextlib.suppress(SourceError):
            existing_topics(settings)
            log(f"Kafka: using the broker already running on {servers}")
            return None
        raise
    log(f"started Kafka on {broker.bootstrap_servers} (log: {broker.log_file})")
    return broker


def start_sources(settings: Settings, log: Callable[[str], None]) -> list[LocalServer]:
    """Start the local servers of the sources the apps read (the demo's by default): a
    loopback SQS, a loopback Kafka. The caller stops what this returns."""
    from ackfold.demo.wordcount import with_demo_policy

    apps = with_demo_policy(settings).apps.values()
    sources = {app.source or "sqs" for app in apps}
    started: list[LocalServer] = []
    try:
        if "sqs" in sources and (sqs := start_sqs(settings, log)) is not None:
            started.append(sqs)
        if "kafka" in sources and (kafka := start_kafka(settings, log)) is not None:
            started.append(kafka)
    except BaseException:
        stop_all(started)
        raise
    return started


def stop_all(servers: list[LocalServer]) -> None:
    for server in reversed(servers):
        server.stop()


def run_stack(
    settings: Settings,
    log: Callable[[str], None] | None = None,
    ready_timeout: float = 300,
    *,
    demo: bool = True,
    verbose: bool = False,
) -> int:
    """Run `airflow standalone` until Ctrl-C or SIGTERM, then stop every process it started.

    `verbose` passes `--verbose` to the demo: Spark's warnings and tracebacks in its output.
    """
    log = log or _say
    if demo:
        # Airflow declares the word count's DAG, and the demo hands the app to it.
        os.environ.update(demo_app_dag_env(settings))
    env = airflow_environment(settings)
    passwords = user_passwords(settings)
    prepare_airflow(settings, env, log)
    assert settings.airflow_home is not None
    log_path = settings.airflow_home / "standalone.log"
    supervisor = Supervisor()

    def _stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    # Install both handlers explicitly: a process started in the background by a
    # non-interactive shell inherits SIGINT ignored, and Ctrl-C must still stop the stack.
    previous = signal.signal(signal.SIGTERM, _stop)
    previous_int = signal.signal(signal.SIGINT, _stop)
    url = f"http://localhost:{settings.airflow.port}"
    # ElasticMQ inherits this environment: the supervisor finds it by the marker too.
    os.environ[MARKER] = supervisor.token
    sources: list[LocalServer] = []
    try:
        sources = start_sources(settings, log)
        with log_path.open("ab") as out:
            log(f"starting airflow standalone (log: {log_path}) ...")
            airflow = supervisor.start(
                [str(Path(sys.executable).parent / "airflow"), "standalone"], env, out
            )
            wait_healthy(
                f"{url}/api/v2/monitor/health", ready_timeout, lambda: airflow.poll() is None
            )
            admin = settings.airflow.admin_user
            others = "".join(
                f"  {'also' if i == 0 else '':12} {name} ({role}), password {passwords[name]}\n"
                for i, (name, role) in enumerate(settings.airflow.users.items())
            )
            log(
                "\n"
                f"  Airflow UI   {url}\n"
                f"  user         {admin}\n"
                f"  password     {passwords[admin]}\n"
                f"{others}"
                f"  warehouse    {settings.warehouse}\n"
                f"  SQS          {settings.sqs.endpoint_url}\n"
                f"  Kafka        {settings.kafka.bootstrap_servers}\n"
                "\n  Ctrl-C stops everything.\n"
            )
            if demo:
                # The demo's report goes to this terminal; it keeps the app running after.
                log("starting the word-count demo (ackfold demo --keep-running --airflow) ...")
                ackfold = str(Path(sys.executable).parent / "ackfold")
                demo_cmd = [ackfold, "demo", "--keep-running", "--airflow"]
                if verbose:
                    demo_cmd.append("--verbose")
                supervisor.start(demo_cmd, dict(os.environ), None)
            while airflow.poll() is None:
                time.sleep(1)
            log(f"airflow standalone exited with {airflow.returncode}; see {log_path}")
            return airflow.returncode or 1
    except KeyboardInterrupt:
        log("stopping ...")
        return 0
    finally:
        # A second Ctrl-C must not cut the shutdown short and leave orphans behind.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop_all(sources)
        supervisor.stop()
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        log("stopped: no ackfold process is left running.")
