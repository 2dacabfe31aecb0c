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
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ackfold.config import Settings, load_settings
from ackfold.config.hosts import is_loopback_host
from ackfold.errors import AckfoldError
from ackfold.ledger.protocol import refuse_unsafe_log_store
from ackfold.ledger.store import store_kind
from ackfold.spark.jars import BASE_BUNDLES, BUNDLES, bundle_jars, resolve, store_bundle
from ackfold.spark.python import check_worker_python, worker_python, workers_run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

log = logging.getLogger(__name__)

# Spark's own log lines in a console session (the CLI, the demo): errors only, so that a
# user sees ackfold's lines and real errors, not Spark's warnings (the native-hadoop notice
# at start, AQE "not supported in streaming" at every query start, ...). A log4j2 file, not
# setLogLevel: the first warnings come while the JVM starts, before a session exists.
QUIET_LOG_CONFIG = Path(__file__).with_name("quiet-log4j2.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# What the JVM itself prints at start, which no option turns off: Spark's launcher always
# adds the incubating Vector API (`--add-modules=jdk.incubator.vector`), and Java warns.
JVM_NOTICES = (b"WARNING: Using incubator modules:",)

GCS_FILE_SYSTEM = "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"
GCS_ABSTRACT_FS = "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFS"

# The tracked app a driver runs, where the caller says so (an app DAG's run): its session
# records the app's heartbeat (`get_spark`).
APP_ENV = "ACKFOLD_APP"

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # delta-rs reads the ledger for the CLI and UI: keep tables at reader version 1.
    "spark.databricks.delta.properties.defaults.enableDeletionVectors": "false",
}


def spark_conf(settings: Settings, *, with_jars: bool = True) -> dict[str, str]:
    """Every Spark setting ackfold needs, for a session builder or `spark-submit --conf`.

    `settings.spark.conf` is applied last, so a user can override any of them.
    """
    conf = {
        **DELTA_CONF,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
        # Delta reads its log with this many tasks (default 50): too many for small machines.
        "spark.databricks.delta.snapshotPartitions": str(settings.spark.shuffle_partitions),
        # VACUUM lists a table's files with this many tasks (default 10,000): 18 s for a
        # tiny table on 2 cores, 2.5 s with a handful.
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": str(
            settings.spark.shuffle_partitions
        ),
        "spark.driver.memory": settings.spark.driver_memory,
        "spark.ui.enabled": str(settings.spark.ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": f"{settings.table_root}/_spark_catalog",
    }
    if with_jars:
        conf["spark.jars"] = ",".join(spark_jars(settings))
    python = worker_python(settings)
    if python is not None:
        conf["spark.pyspark.python"] = python
    if store_kind(settings.table_root) == "gcs":
        # Hadoop names S3A and ABFS in its defaults, not the GCS connector: its file system
        # and FileContext's (streaming checkpoints), which a jar of `spark.jars` cannot
        # register by itself (Hadoop looks on the JVM's class path).
        conf["spark.hadoop.fs.gs.impl"] = GCS_FILE_SYSTEM
        conf["spark.hadoop.fs.AbstractFileSystem.gs.impl"] = GCS_ABSTRACT_FS
    conf.update(settings.spark.conf)
    refuse_unsafe_log_store(settings.table_root, conf)
    return conf


def spark_jars(settings: Settings) -> list[str]:
    """The jars Spark needs beyond its own (Delta, the Kafka source, and the Hadoop
    connector of the warehouse's object store), verified in the local cache. The
    connector is resolved from Maven Central on demand, the first time a session starts
    for a warehouse on its store."""
    assert settings.jars_dir is not None
    jars = [
        str(path)
        for name in BASE_BUNDLES
        if BUNDLES[name].for_spark
        for path in bundle_jars(name, settings.jars_dir)
    ]
    connector = store_bundle(settings.table_root)
    if connector is not None:
        jars += [str(path) for path in resolve(connector, settings.jars_dir, log.info)]
    return jars


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


def quiet_conf(conf: dict[str, str]) -> dict[str, str]:
    """`conf` with the driver JVM started on `QUIET_LOG_CONFIG`: Spark logs errors only.

    A `-Dlog4j2.configurationFile` of the user's own (in `spark.conf`) comes after ours in
    the options, and so wins.

    Example:
        >>> options = quiet_conf({DRIVER_JAVA_OPTIONS: "-Xss4m"})[DRIVER_JAVA_OPTIONS]
        >>> options.startswith("-Dlog4j2.configurationFile=file:"), options.endswith(" -Xss4m")
        (True, True)
    """
    ours = f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG.as_uri()}"
    theirs = conf.get(DRIVER_JAVA_OPTIONS, "")
    return {**conf, DRIVER_JAVA_OPTIONS: f"{ours} {theirs}".strip()}


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


class SparkConnectError(AckfoldError, RuntimeError):
    """`spark.remote` names a Spark Connect endpoint that cannot serve ackfold."""


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session: nothing on this side has a JVM."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


# A Connect server starts a Python process for each foreachBatch query it starts, and gives
# it a fixed 10 s to connect back (Spark's PythonWorkerFactory, not configurable). On a
# loaded server an import-heavy start misses that window; nothing has run yet, so the start
# is tried again.
WORKER_CONNECT_BACK = "Python worker failed to connect back"
START_ATTEMPTS = 3


def start_query(writer: DataStreamWriter) -> StreamingQuery:
    """`writer.start()`, tried again when a Spark Connect server's Python worker for the
    query's `foreachBatch` did not start in time (a busy server): the query then never
    started, so its checkpoint is untouched. Any other failure is raised at once."""
    from pyspark.errors import PySparkException

    for attempt in range(1, START_ATTEMPTS):
        try:
            return writer.start()
        except PySparkException as exc:
            if WORKER_CONNECT_BACK not in str(exc):
                raise
            log.warning(
                "the Spark Connect server's Python worker did not start in time (attempt %d "
                "of %d); starting the query again",
                attempt,
                START_ATTEMPTS,
            )
            time.sleep(attempt)
    return writer.start()


# What a Connect client may set on its session: runtime SQL settings. The rest (jars, the
# Delta extension and catalog, memory, the workers' Python) is the server's start-up.
_SERVER_SIDE = (
    "spark.jars",
    "spark.sql.extensions",
    "spark.sql.catalog.spark_catalog",
    "spark.sql.warehouse.dir",
    "spark.driver.",
    "spark.ui.",
    "spark.pyspark.",
)


def connect_conf(settings: Settings) -> dict[str, str]:
    """The settings of `spark_conf` that a Spark Connect session sets for itself.

    Example:
        >>> conf = connect_conf(load_settings(spark={"remote": "sc://127.0.0.1:15002"}))
        >>> conf["spark.sql.session.timeZone"], "spark.sql.extensions" in conf
        ('UTC', False)
    """
    conf = spark_conf(settings, with_jars=False)
    return {k: v for k, v in conf.items() if not k.startswith(_SERVER_SIDE)}


def connect_address(remote: str) -> tuple[str, int]:
    """The (host, port) of a Spark Connect URL; 15002, Spark's, when it names none.

    Example:
        >>> connect_address("sc://10.0.0.5/;token=x"), connect_address("sc://[::1]:443")
        (('10.0.0.5', 15002), ('::1', 443))
    """
    netloc = remote.removeprefix("sc://").split("/", 1)[0]
    host, sep, port = netloc.rpartition(":")
    if not sep or not port.isdigit() or host.endswith(":"):
        host, port = netloc, "15002"
    return host.strip("[]"), int(port)


def _remote_session(settings: Settings, remote: str, app_name: str) -> SparkSession:
    """A Spark Connect session on `remote`, with ackfold's session settings, checked for
    Delta before anything runs."""
    from pyspark.errors import PySparkException
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    from ackfold.config.connections import mask_token

    where = f"spark.remote is {mask_token(remote)} (ACKFOLD_SPARK__REMOTE)"
    host, port = connect_address(remote)
    try:
        # The client retries a dead endpoint for minutes: say it at once instead.
        with socket.create_connection((host, port), timeout=5):
            pass
    except OSError as exc:
        raise SparkConnectError(
            f"{where}, but nothing answers at {host}:{port} ({exc.strerror or exc}): start "
            "the server (`make connect` runs one on this machine), or unset spark.remote "
            "to run Spark here"
        ) from None
    try:
        # The Connect builder itself: PySpark's generic one would hand back a classic
        # session that this process may already have. What PySpark's functions read to
        # build Connect expressions is set as the generic builder sets it.
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
        remote_session = RemoteSession.builder.remote(remote).appName(app_name).getOrCreate()
        spark = cast("SparkSession", remote_session)  # PySpark's own typing does the same
        for key, value in connect_conf(settings).items():
            spark.conf.set(key, value)
        # Analysis only, nothing runs: a server without Delta cannot find the source.
        _ = spark.read.format("delta").load(f"{settings.table_root}/_ackfold_probe").schema
    except PySparkException as exc:
        condition = exc.getCondition() or ""
        if "PATH_DOES_NOT_EXIST" in condition or "PATH_NOT_FOUND" in condition:
            return spark
        if condition == "DATA_SOURCE_NOT_FOUND":
            raise SparkConnectError(
                f"{where}, but that server has no Delta: start it with the Delta jars and "
                "Delta's session extension and catalog (`make connect` runs one on this "
                "machine)"
            ) from None
        raise SparkConnectError(f"{where}, but it failed: {str(exc).splitlines()[0]}") from None
    except Exception as exc:  # grpc's own errors: nothing listens, TLS, a bad token
        raise SparkConnectError(
            f"{where}, but no Spark Connect server answers there "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}): start it (`make "
            "connect` runs one on this machine), or unset spark.remote to run Spark here"
        ) from None
    return spark


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
        return _remote_session(settings, settings.spark.remote, app_name)
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
