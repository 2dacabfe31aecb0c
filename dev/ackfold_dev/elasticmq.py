"""The local ElasticMQ server: a real SQS API on loopback, from the jar cache.

`ackfold sqs` (`make sqs`) and the sqs test tier run it with conf/elasticmq.conf, which
creates the demo queues. The JVM runs in a process group of its own; stopping the server
stops the group.

Example:
    >>> from ackfold.config import load_settings
    >>> with ElasticMQ(load_settings(), port=9400) as server:
    ...     server.queue_names()
    ['wordcount-sentences', 'wordcount-sentences-dlq']
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from ackfold.config import Settings
from ackfold.errors import AckfoldError
from ackfold.sources.sqs_client import LOCAL_REGION, is_loopback, sqs_client
from ackfold.spark.jars import bundle_jars
from ackfold_dev import PROJECT_DIR
from ackfold_dev.ports import port_free
from ackfold_dev.server import JvmProcess, JvmServer

MAIN_CLASS = "org.elasticmq.server.Main"
DEFAULT_PORT = 9324
# What ElasticMQ logs once its SQS port is bound, or could not be: it does not exit then.
STARTED = b"Started SQS rest server"
BIND_FAILED = b"Cannot start SQS rest server"


class ElasticMQError(AckfoldError, RuntimeError):
    """The local ElasticMQ server cannot start, or died."""


class ElasticMQ(JvmServer):
    """One ElasticMQ process on 127.0.0.1, serving the queues of `config`."""

    error = ElasticMQError

    def __init__(
        self,
        settings: Settings,
        *,
        port: int | None = None,
        config: Path | None = None,
        log_file: Path | None = None,
    ) -> None:
        self.settings = settings
        url = settings.sqs.endpoint_url
        self.port = port or (urlsplit(url).port if url else None) or DEFAULT_PORT
        self.config = config or PROJECT_DIR / "conf" / "elasticmq.conf"
        self.log_file = log_file or settings.var_dir / "logs" / "elasticmq.log"
        self._jvm = JvmProcess("ElasticMQ", self.log_file)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> Any:
        """An SQS client for this server, with the settings' retries and timeouts."""
        return sqs_client(self._settings_here())

    def queue_names(self) -> list[str]:
        urls: list[str] = self.client().list_queues().get("QueueUrls", [])
        return sorted(url.rsplit("/", 1)[-1] for url in urls)

    def start(self, timeout: float = 60) -> None:
        """Start the server; return once it answers ListQueues, or raise `ElasticMQError`."""
        if self._jvm.running:
            raise ElasticMQError(f"ElasticMQ already runs on {self.endpoint_url}")
        endpoint = self.settings.sqs.endpoint_url
        # Unset, it serves on its own port (the caller points its clients at it: `client`).
        if endpoint is not None and (
            not is_loopback(endpoint) or urlsplit(endpoint).scheme != "http"
        ):
            raise ElasticMQError(
                f"sqs.endpoint_url is {endpoint}, but the local ElasticMQ serves only "
                "http on loopback: set ACKFOLD_SQS__ENDPOINT_URL=http://127.0.0.1:9324"
            )
        if not self.config.is_file():
            raise ElasticMQError(f"the ElasticMQ config {self.config} does not exist")
        if not port_free(self.port):
            raise ElasticMQError(
                f"port {self.port} on 127.0.0.1 is already taken (another ElasticMQ?): stop "
                "that process, or choose another port in sqs.endpoint_url "
                "(ACKFOLD_SQS__ENDPOINT_URL)"
            )
        assert self.settings.jars_dir is not None
        classpath = os.pathsep.join(
            str(j) for j in bundle_jars("elasticmq", self.settings.jars_dir)
        )
        args = [
            f"-Dconfig.file={self.config}",
            # System properties override the file (Typesafe config's ConfigFactory.load).
            f"-Drest-sqs.bind-port={self.port}",
            f"-Daws.region={self.settings.sqs.region or LOCAL_REGION}",
            "-cp", classpath,
            MAIN_CLASS,
        ]  # fmt: skip
        try:
            self._jvm.start(args)
        except FileNotFoundError as exc:
            raise ElasticMQError(str(exc)) from None
        # No retries inside a probe: the loop is the retry.
        probe = sqs_client(self._settings_here(max_retries=0))
        try:
            self._wait_ready(timeout, lambda: self._answers(probe), self.endpoint_url)
        except BaseException:
            self.stop()
            raise

    def _settings_here(self, **sqs: Any) -> Settings:
        section = self.settings.sqs.model_copy(update={"endpoint_url": self.endpoint_url, **sqs})
        return self.settings.model_copy(update={"sqs": section})

    def _answers(self, probe: Any) -> bool:
        log = self._jvm.logged()
        if BIND_FAILED in log:
            raise ElasticMQError(self._jvm.failure(f"could not bind port {self.port}"))
        if STARTED in log:
            # Only once our JVM holds the port can the answer be its own.
            with contextlib.suppress(BotoCoreError, ClientError):
                probe.list_queues()
                return True
        return False

    def banner(self) -> str:
        return (
            f"ElasticMQ (SQS) on {self.endpoint_url} — queues: "
            f"{', '.join(self.queue_names()) or 'none'} — Ctrl-C stops it\n"
            # ackfold's own default is AWS's endpoint: another shell must name this one.
            f"point ackfold at it with: ACKFOLD_SQS__ENDPOINT_URL={self.endpoint_url}"
        )
