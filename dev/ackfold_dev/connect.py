"""A Spark Connect server on this machine, with Delta and the Kafka source (`ackfold
connect`, `make connect`, the connect test tier).

The pip pyspark ships the server's jar but no `sbin/start-connect-server.sh`, so this
starts it as that script would: `spark-submit --class ...SparkConnectServer` with the
pinned Delta and Kafka jars from the local cache and Delta's session extension and
catalog. Its Python workers (a `foreachBatch` under Connect runs in one) are this
interpreter, which has ackfold. Point ackfold at it with
`ACKFOLD_SPARK__REMOTE=sc://127.0.0.1:15002`.

Spark gives a `foreachBatch` worker a fixed 10 s to connect back, and its imports (pandas,
pyarrow, grpc) take over 2 s of CPU. So, where this process may, the server's session
weighs as nice -10 against the machine's other sessions, and its workers start at
`nice -n -10` within it.

Example:
    >>> with LocalConnectServer(settings, port=free_port()) as server:  # doctest: +SKIP
    ...     server.url
    'sc://127.0.0.1:...'
"""

from __future__ import annotations

import contextlib
import os
import resource
import shlex
import socket
import sys
from pathlib import Path

from ackfold.config import Settings
from ackfold.errors import AckfoldError
from ackfold_dev.cluster import spark_home
from ackfold_dev.ports import LOOPBACK, port_free
from ackfold_dev.server import JvmProcess, JvmServer

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark Connect's own default
WORKER_NICENESS = -10


def may_raise_priority() -> bool:
    """True when this process may start children at WORKER_NICENESS below its own: as
    root, or within RLIMIT_NICE (which allows down to 20 - its value)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    lowest = -20 if soft == resource.RLIM_INFINITY else 20 - soft
    return os.geteuid() == 0 or os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS >= lowest


class ConnectServerError(AckfoldError, RuntimeError):
    """The local Spark Connect server cannot start, or died."""


class LocalConnectServer(JvmServer):
    """`spark-submit` running a Spark Connect server on `host:port`, its Spark on
    `spark.master` (local by default), logging to `<var_dir>/connect/server.log`."""

    error = ConnectServerError

    def __init__(
        self, settings: Settings, *, port: int = DEFAULT_PORT, host: str = LOOPBACK
    ) -> None:
        self.settings = settings
        self.port = port
        self.host = host
        self.base_dir = settings.var_dir / "connect"
        self._jvm = JvmProcess("The Spark Connect server", self.base_dir / "server.log")

    @property
    def python(self) -> str:
        """The Python of the server's workers: `spark.python`, else this interpreter."""
        return self.settings.spark.python or sys.executable

    @property
    def url(self) -> str:
        """What `spark.remote` (ACKFOLD_SPARK__REMOTE) should say to run through it."""
        return f"sc://{self.host}:{self.port}"

    def argv(self) -> list[str]:
        """The spark-submit command line: ackfold's Spark settings, as server settings."""
        from ackfold.spark.conf import quiet_conf, spark_conf

        conf = quiet_conf(spark_conf(self.settings.model_copy(deep=True)))
        conf.update(
            {
                "spark.connect.grpc.binding.address": self.host,
                "spark.connect.grpc.binding.port": str(self.port),
                # The Python of foreachBatch and UDF workers: this one, which has ackfold.
                "spark.pyspark.python": self.python,
                "spark.pyspark.driver.python": sys.executable,
            }
        )
        argv = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS]
        argv += ["--master", self.settings.spark.master, "--name", "ackfold-connect"]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        return [*argv, "spark-internal"]

    def start(self, timeout: float = 180) -> None:
        """Start the server; return once it accepts connections, or raise
        `ConnectServerError` with the end of its log."""
        if self._jvm.running:
            raise ConnectServerError(f"the Spark Connect server already runs at {self.url}")
        if not port_free(self.port, self.host):
            raise ConnectServerError(
                f"port {self.port} on {self.host} is already taken (another Spark Connect "
                "server?): stop that process, or choose another with --port"
            )
        self.base_dir.mkdir(parents=True, exist_ok=True)
        env = {
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": self.host,
            # Connect starts its foreachBatch workers with this, not spark.pyspark.python.
            "PYSPARK_PYTHON": self._worker_python(),
        }
        command, *args = self.argv()
        self._jvm.start(args, command=command, env=env)
        self._raise_group_priority()
        try:
            self._wait_ready(timeout, self._answers, f"{self.host}:{self.port}")
        except BaseException:
            self.stop()
            raise

    def _worker_python(self) -> str:
        """The command the server starts its foreachBatch workers with: `python`, or where
        allowed a launcher that runs it at WORKER_NICENESS."""
        if not may_raise_priority():
            return self.python
        launcher = self.base_dir / "python-worker"
        launcher.write_text(
            f'#!/bin/sh\nexec nice -n {WORKER_NICENESS} {shlex.quote(self.python)} "$@"\n'
        )
        launcher.chmod(0o755)
        return str(launcher)

    def _raise_group_priority(self) -> None:
        """Weigh the server's session (the JVM and its workers) as WORKER_NICENESS against
        the machine's other sessions: Linux shares the CPU between sessions first (its
        autogroups), so a worker's own niceness alone would not get it the CPU."""
        if may_raise_priority():
            with contextlib.suppress(OSError):  # a kernel without autogroups
                Path(f"/proc/{self._jvm.pid}/autogroup").write_text(str(WORKER_NICENESS))

    def _answers(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1):
                return True
        except OSError:
            return False

    def banner(self) -> str:
        return (
            f"Spark Connect server with Delta at {self.url} (Spark on "
            f"{self.settings.spark.master}) — Ctrl-C stops it\n"
            f"  run ackfold through it:  export ACKFOLD_SPARK__REMOTE={self.url}\n"
            f"  its log:                 {self._jvm.log_file}"
        )
