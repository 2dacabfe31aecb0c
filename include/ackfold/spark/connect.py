"""Spark Connect: a session on a `spark.remote` endpoint, checked for Delta before anything
runs, the settings a Connect client may set, and query starts that survive a busy server.

Example:
    >>> connect_address("sc://spark.example.com/;token=x")
    ('spark.example.com', 15002)
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import TYPE_CHECKING, cast

from ackfold.config import Settings
from ackfold.errors import AckfoldError
from ackfold.spark.conf import spark_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

log = logging.getLogger(__name__)


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
    "spark.sql.codegen.cache.",
    "spark.driver.",
    "spark.ui.",
    "spark.pyspark.",
)


def connect_conf(settings: Settings) -> dict[str, str]:
    """The settings of `spark_conf` that a Spark Connect session sets for itself.

    Example:
        >>> from ackfold.config import load_settings
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


def remote_session(settings: Settings, remote: str, app_name: str) -> SparkSession:
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
