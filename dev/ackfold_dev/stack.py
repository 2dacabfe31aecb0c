"""The embedded stack behind `make run`: Airflow's components, as `airflow standalone` runs
them (SQLite, LocalExecutor, the simple auth manager), with ackfold's DAGs and plugin.

The api-server starts first, listening on `airflow.host` (loopback unless told
otherwise); the scheduler, the DAG processor and the triggerer start once it answers, so
that no task's first attempt fails on an execution API that is not up yet. Neither the
scheduler nor the triggerer serves logs on a port of its own (8793, 8794 on every
interface): every component shares this machine's log folder, which the api-server reads.

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

from ackfold.airflow.connections import SPARK_CONN_ID, spark_connect_connection, spark_connection
from ackfold.airflow.defaults import LEDGER_POOL, LEDGER_POOL_DESCRIPTION
from ackfold.config import Settings
from ackfold.config.hosts import is_loopback_host
from ackfold_dev.airflow_env import (
    airflow_environment,
    airflow_url,
    demo_app_env,
    keep_private,
    listen_address,
    local_api_url,
    metadata_database,
    user_passwords,
)
from ackfold_dev.airflow_env import airflow_users as airflow_users  # re-exported
from ackfold_dev.airflow_env import passwords_file as passwords_file  # re-exported
from ackfold_dev.elasticmq import ElasticMQ, ElasticMQError
from ackfold_dev.server import LocalServer

if TYPE_CHECKING:
    from ackfold_dev.kafka_broker import KafkaBroker

MARKER = "ACKFOLD_STACK_ID"
# Started once the api-server answers; no log server listens (see the module doc).
COMPONENTS = (
    ("scheduler", "--skip-serve-logs"),
    ("dag-processor",),
    ("triggerer", "--skip-serve-logs"),
)


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
    assert settings.airflow_home is not None  # Settings resolves it
    database = metadata_database(env, settings.airflow_home)
    if database is not None:
        keep_private(database)  # before Airflow creates it world-readable
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

    def reap(self) -> list[subprocess.Popen[bytes]]:
        """The processes started here that have ended since the last call, reaped: none
        is left a zombie (`<defunct>`) until the stack stops."""
        return [
            proc for proc in self.processes if proc.returncode is None and proc.poll() is not None
        ]

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


def create_ledger(settings: Settings, log: Callable[[str], None]) -> list[str]:
    """Create the ledger's missing tables once, with delta-rs, before the stack starts its
    processes: the demo's driver and Airflow's first tasks would otherwise each create
    them at the same moment, and all but one lose a commit and retry. Returns the tables
    made here."""
    from ackfold.ledger.commits.writer import LedgerWriter

    made = [name for name, new in LedgerWriter(settings.table_root).create().items() if new]
    if made:
        log(f"created the ledger's tables in {settings.table_root}: {', '.join(made)}")
    return made


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
    from ackfold.sources.base import SourceError
    from ackfold.sources.kafka_client import existing_topics
    from ackfold_dev.kafka_broker import KafkaBroker, KafkaBrokerError

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


def source_lines(settings: Settings, started: list[LocalServer]) -> str:
    """The banner's lines for the sources the apps read: what this stack started, and
    where it found a server already running; nothing for a source no app reads."""
    from ackfold.demo.wordcount import with_demo_policy
    from ackfold.sources.sqs_client import is_loopback

    used = {app.source or "sqs" for app in with_demo_policy(settings).apps.values()}
    ours = {type(server).__name__ for server in started}
    lines = ""
    if "sqs" in used:
        sqs = settings.sqs.endpoint_url
        where = "started here" if "ElasticMQ" in ours else "already running"
        lines += f"  SQS          {sqs} ({where if is_loopback(sqs) else 'not started here'})\n"
    if "kafka" in used:
        kafka = settings.kafka.bootstrap_servers
        where = "started here" if "KafkaBroker" in ours else "not started here"
        lines += f"  Kafka        {kafka} ({where})\n"
    return lines


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
    """Run Airflow's components until Ctrl-C or SIGTERM, then stop every process started.

    `verbose` passes `--verbose` to the demo: Spark's warnings and tracebacks in its output.
    """
    log = log or _say
    if demo:
        # The demo's app, in every process started from here: Airflow declares its DAG and
        # folds, replays and checks it by its policy; the demo hands the app to that DAG.
        os.environ.update(demo_app_env(settings))
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
    url = airflow_url(settings)
    # ElasticMQ inherits this environment: the supervisor finds it by the marker too.
    os.environ[MARKER] = supervisor.token
    sources: list[LocalServer] = []
    try:
        create_ledger(settings, log)
        sources = start_sources(settings, log)
        with log_path.open("ab") as out:
            airflow_bin = str(Path(sys.executable).parent / "airflow")
            log(
                f"starting Airflow's api-server on {listen_address(settings)} (log: {log_path}) ..."
            )
            api = supervisor.start([airflow_bin, "api-server"], env, out)
            wait_healthy(
                f"{local_api_url(settings)}/api/v2/monitor/health",
                ready_timeout,
                lambda: api.poll() is None,
            )
            # Only now: a task started before the api-server answers fails its first try.
            log("the api-server answers: starting the scheduler, DAG processor and triggerer")
            components = {"api-server": api}
            for args in COMPONENTS:
                components[args[0]] = supervisor.start([airflow_bin, *args], env, out)
            admin = settings.airflow.admin_user
            others = "".join(
                f"  {'also' if i == 0 else '':12} {name} ({role}), password {passwords[name]}\n"
                for i, (name, role) in enumerate(settings.airflow.users.items())
            )
            log(
                "\n"
                f"  Airflow UI   {url}  (Plugins -> Reliability for ackfold's pages)\n"
                f"  listening on {listen_address(settings)}\n"
                f"  user         {admin}\n"
                f"  password     {passwords[admin]}\n"
                f"{others}"
                f"  warehouse    {settings.warehouse}\n"
                f"{source_lines(settings, sources)}"
                "\n  Ctrl-C stops everything.\n"
            )
            demo_proc = None
            if demo:
                # The demo's report goes to this terminal; it keeps the app running after.
                log("starting the word-count demo (ackfold demo --keep-running --airflow) ...")
                ackfold = str(Path(sys.executable).parent / "ackfold")
                demo_cmd = [ackfold, "demo", "--keep-running", "--airflow"]
                if verbose:
                    demo_cmd.append("--verbose")
                demo_proc = supervisor.start(demo_cmd, dict(os.environ), None)
            while all(proc.poll() is None for proc in components.values()):
                for ended in supervisor.reap():  # the demo, once it has handed the app over
                    if ended is demo_proc and ended.returncode:
                        log(f"the demo exited with {ended.returncode}: see its lines above")
                time.sleep(1)
            name, proc = next((n, p) for n, p in components.items() if p.poll() is not None)
            log(f"Airflow's {name} exited with {proc.returncode}; see {log_path}")
            return proc.returncode or 1
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
