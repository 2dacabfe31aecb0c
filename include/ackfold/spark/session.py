"""The one place a Spark session is made: Delta configured, quiet, sized for small machines.

Example:
    >>> from ackfold.spark import get_spark
    >>> spark = get_spark()  # local[*] unless ACKFOLD_SPARK__MASTER says otherwise
    >>> spark.range(3).count()
    3
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from ackfold.config import Settings, load_settings
from ackfold.config.hosts import is_loopback_host
from ackfold.errors import AckfoldError
from ackfold.spark.conf import quiet_conf, spark_conf
from ackfold.spark.connect import remote_session
from ackfold.spark.python import check_worker_python, worker_python, workers_run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# What the JVM itself prints at start, which no option turns off: Spark's launcher always
# adds the incubating Vector API (`--add-modules=jdk.incubator.vector`), and Java warns.
JVM_NOTICES = (b"WARNING: Using incubator modules:",)

# The tracked app a driver runs, where the caller says so (an app DAG's run): its session
# records the app's heartbeat (`get_spark`).
APP_ENV = "ACKFOLD_APP"


class SparkMasterUnreachable(AckfoldError, RuntimeError):
    """`spark.master` names a standalone master that nothing answers at."""


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) of each master in a `spark://` URL (several with standbys); [] for
    other masters.

    Example:
        >>> master_addresses("spark://10.0.0.5:7077,10.0.0.6:7077")
        [('10.0.0.5', 7077), ('10.0.0.6', 7077)]
        >>> master_addresses("local[2]")
        []
    """
    if not master.startswith("spark://"):
        return []
    addresses = []
    for part in master.removeprefix("spark://").split(","):
        host, sep, port = part.rpartition(":")
        if not sep or not port.isdigit():
            host, port = part, "7077"  # Spark's default master port
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def check_master(master: str, timeout: float = 5.0) -> None:
    """Raise `SparkMasterUnreachable` unless a `spark://` master accepts connections.

    Spark itself retries a master that is down for a minute, then prints pages of stack
    traces: this says it at once, naming the setting. Other masters are not checked.
    """
    addresses = master_addresses(master)
    problems = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            problems.append(f"{host}:{port}: {exc.strerror or exc}")
    if problems:
        raise SparkMasterUnreachable(
            f"spark.master is {master} (ACKFOLD_SPARK__MASTER), but no Spark master answers "
            f"there ({'; '.join(problems)}): start it (`make cluster` runs one on this "
            "machine), or set spark.master to a running master, or to local[*]"
        )


def on_loopback(master: str) -> bool:
    """True when the driver need not be reachable from another host: a local master, or
    a standalone master on this machine (its executors are here too).

    Example:
        >>> on_loopback("local[2]"), on_loopback("spark://127.0.0.1:7077")
        (True, True)
        >>> on_loopback("spark://10.0.0.5:7077"), on_loopback("yarn")
        (False, False)
    """
    hosts = [host for host, _ in master_addresses(master)]
    return master.startswith("local") or bool(hosts and all(map(is_loopback_host, hosts)))


def _submitted_master() -> str:
    """The master spark-submit was given (its JVM is up; the session is not made yet)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return str(SparkConf().get("spark.master", ""))


@contextmanager
def jvm_notices_dropped() -> Iterator[None]:
    """While a driver JVM starts inside: its stderr is a pipe, which a thread forwards to
    this process's stderr line by line, for the JVM's whole life, all but `JVM_NOTICES`."""
    sys.stderr.flush()
    read, write = os.pipe()
    real = os.dup(2)
    os.dup2(write, 2)  # the JVM inherits fd 2 as it starts
    os.close(write)
    threading.Thread(target=_forward, args=(read, real), name="jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # this process writes to its own stderr again


def _forward(read: int, real: int) -> None:
    with open(read, "rb") as lines, open(real, "wb", buffering=0) as stderr:
        for line in lines:  # until the JVM (and whatever it started) exits
            if not line.startswith(JVM_NOTICES):
                stderr.write(line)


def get_spark(
    settings: Settings | None = None,
    app_name: str = "ackfold",
    *,
    quiet: bool = False,
    app: str | None = None,
) -> SparkSession:
    """Get or create the Spark session for `settings` (loaded from the environment if None).

    A tracked app names itself (`app`, else `ACKFOLD_APP` in the environment, which an
    app DAG's run sets): its session then records the app's heartbeat
    (`ackfold.track.heartbeat.install_heartbeat`), which the Reliability UI and the
    `stalled` alert read.

    With `spark.remote` set, a Spark Connect session on that endpoint: ackfold sets its
    session settings (`connect_conf`) and checks that the server has Delta, raising
    `SparkConnectError` naming the setting otherwise. Else a classic session:

    `quiet` is for a session whose output a person reads on a console (the CLI, the demo):
    Spark then logs errors only, from the JVM's start on, and the JVM's notice at start is
    dropped (`jvm_notices_dropped`); otherwise Spark logs its warnings too, as it does by
    default. A session that already exists keeps its JVM's start-up logging; only its
    level changes.

    Under `spark-submit` pass the same `spark_conf()` and jars on the command line, as
    `ackfold.airflow.spark_jobs.spark_submit_kwargs()` does: the driver's classpath is
    fixed by then.
    Raises `SparkMasterUnreachable` at once when a `spark://` master does not answer.
    """
    settings = settings or load_settings()
    spark = _session(settings, app_name, quiet)
    app = app or os.environ.get(APP_ENV) or None
    if app is not None:
        from ackfold.track.heartbeat import install_heartbeat

        install_heartbeat(spark, settings, app)
    return spark


def _session(settings: Settings, app_name: str, quiet: bool) -> SparkSession:
    from pyspark.sql import SparkSession

    if settings.spark.remote:
        return remote_session(settings, settings.spark.remote, app_name)
    builder = SparkSession.builder.appName(app_name)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    conf = spark_conf(settings, with_jars=not submitted)
    if quiet and not submitted:
        conf = quiet_conf(conf)
    master = _submitted_master() if submitted else settings.spark.master
    check_master(master)
    check_worker_python(settings)
    if not submitted:
        # Under spark-submit the master and the jars were chosen on its command line.
        builder = builder.master(master)
        if on_loopback(master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, no warning
    for key, value in conf.items():
        builder = builder.config(key, value)
    from pyspark import SparkContext

    with ExitStack() as starting:
        if not submitted:
            starting.enter_context(workers_run(worker_python(settings)))
        if quiet and not submitted and SparkContext._gateway is None:  # the JVM starts here
            starting.enter_context(jvm_notices_dropped())
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR" if quiet else "WARN")
    return spark
