"""A Spark Connect server on this machine, with Delta and the Kafka source (`ackfold
connect`, `make connect`, the connect test tier).

The pip pyspark ships the server's jar but no `sbin/start-connect-server.sh`, so this
starts it as that script would: `spark-submit --class ...SparkConnectServer` with the
pinned Delta and Kafka jars from the local cache and Delta's session extension and
catalog. Its Python workers (a `foreachBatch` under Connect runs in one) are this
interpreter, which has ackfold. Point ackfold at it with
`ACKFOLD_SPARK__REMOTE=sc://127.0.0.1:15002`.

Example:
    >>> with LocalConnectServer(settings, port=free_port()) as server:  # doctest: +SKIP
    ...     server.url
    'sc://127.0.0.1:...'
"""

from __future__ import annotations

import socket
import sys

from ackfold.config import Settings
from ackfold.local.cluster import spark_home
from ackfold.local.ports import LOOPBACK, port_free
from ackfold.local.server import JvmProcess, JvmServer

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark Connect's own default


class ConnectServerError(RuntimeError):
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
        from ackfold.spark import quiet_conf, spark_conf

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
            "PYSPARK_PYTHON": self.python,
        }
        command, *args = self.argv()
        self._jvm.start(args, command=command, env=env)
        try:
            self._wait_ready(timeout, self._answers, f"{self.host}:{self.port}")
        except BaseException:
            self.stop()
            raise

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
