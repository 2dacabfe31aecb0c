"""The local Kafka broker: one KRaft node (broker and controller) on loopback, from the
jar cache.

`ackfold kafka` (`make kafka`) and the kafka test tier run it. Its data directory is
formatted once (`kafka-storage format`) and kept, so topics and records survive a
restart; topics are never created automatically, so a typo in a topic name is an error,
not a new topic. On start it creates the topics it is given (the demo's, by default).
With `sasl_users` (name -> password) its one listener takes SASL/PLAIN over plain TCP
(`SASL_PLAINTEXT`), as a broker with authentication would, for testing clients configured
with `kafka.security_protocol` and `kafka.sasl_*`; `settings` must carry one of them.

Example:
    >>> from ackfold.config import load_settings
    >>> with KafkaBroker(load_settings(), port=9400, data_dir=tmp) as broker:
    ...     broker.topics()                                        # doctest: +SKIP
    ['wordcount-sentences', 'wordcount-sentences-dlq']
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterable, Mapping
from datetime import timedelta
from pathlib import Path

from ackfold.config import Settings
from ackfold.config.hosts import is_loopback_host
from ackfold.sources.base import SourceError
from ackfold.sources.kafka_client import create_topics, existing_topics
from ackfold.spark.jars import bundle_jars
from ackfold_dev import PROJECT_DIR
from ackfold_dev.ports import free_port, port_free
from ackfold_dev.server import JvmProcess, JvmServer, java

MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
DEFAULT_PORT = 9092
LOG_CONFIG = PROJECT_DIR / "conf" / "kafka-log4j2.properties"
# A small heap: the local broker holds test and demo topics only.
JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true")
_PROBE_TIMEOUT = timedelta(seconds=1)


class KafkaBrokerError(SourceError):
    """The local Kafka broker cannot start, or died."""


class KafkaBroker(JvmServer):
    """One KRaft broker on 127.0.0.1:`port`, data in `data_dir`."""

    error = KafkaBrokerError

    def __init__(
        self,
        settings: Settings,
        *,
        port: int | None = None,
        data_dir: Path | None = None,
        log_file: Path | None = None,
        topics: Iterable[str] | None = None,
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        first = settings.kafka.bootstrap_servers.split(",")[0].strip()
        host, _, configured = first.rpartition(":")
        self.host = host
        self.port = port or int(configured) or DEFAULT_PORT
        self.data_dir = data_dir or settings.var_dir / "kafka"
        self.log_file = log_file or settings.var_dir / "logs" / "kafka.log"
        if topics is None:
            from ackfold.demo.wordcount import demo_topics

            topics = demo_topics(settings)
        self.initial_topics = list(topics)
        self.sasl_users = dict(sasl_users or {})
        self._jvm = JvmProcess("The Kafka broker", self.log_file)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def settings_here(self) -> Settings:
        """`settings` pointed at this broker."""
        kafka = self.settings.kafka.model_copy(update={"bootstrap_servers": self.bootstrap_servers})
        return self.settings.model_copy(update={"kafka": kafka})

    def topics(self) -> list[str]:
        return sorted(t for t in existing_topics(self.settings_here()) if not t.startswith("__"))

    def start(self, timeout: float = 60) -> None:
        """Format the data directory if new, start the broker, create the initial topics;
        raise `KafkaBrokerError` if it does not come up within `timeout` s."""
        if self._jvm.running:
            raise KafkaBrokerError(f"the Kafka broker already runs on {self.bootstrap_servers}")
        if not is_loopback_host(self.host):
            raise KafkaBrokerError(
                f"kafka.bootstrap_servers is {self.settings.kafka.bootstrap_servers}, but the "
                "local broker serves only loopback: set "
                "ACKFOLD_KAFKA__BOOTSTRAP_SERVERS=127.0.0.1:9092"
            )
        if not port_free(self.port):
            raise KafkaBrokerError(
                f"port {self.port} on 127.0.0.1 is already taken (another Kafka?): stop that "
                "process, or choose another port in kafka.bootstrap_servers "
                "(ACKFOLD_KAFKA__BOOTSTRAP_SERVERS)"
            )
        assert self.settings.jars_dir is not None
        classpath = os.pathsep.join(str(j) for j in bundle_jars("kafka", self.settings.jars_dir))
        properties = self._write_properties()
        try:
            java()
        except FileNotFoundError as exc:
            raise KafkaBrokerError(str(exc)) from None
        self._format(classpath, properties)
        self._jvm.start(
            [*JVM_OPTIONS, f"-Dlog4j2.configurationFile={LOG_CONFIG}", "-cp", classpath,
             MAIN_CLASS, str(properties)]
        )  # fmt: skip
        here = self.settings_here()
        probe = here.model_copy(
            update={"kafka": here.kafka.model_copy(update={"timeout": _PROBE_TIMEOUT})}
        )
        try:
            self._wait_ready(timeout, lambda: self._answers(probe), self.bootstrap_servers)
            create_topics(self.settings_here(), self.initial_topics)
        except BaseException:
            self.stop()
            raise

    def _write_properties(self) -> Path:
        logs = self.data_dir / "data"
        controller = free_port()
        name = "SASL_PLAINTEXT" if self.sasl_users else "PLAINTEXT"
        lines = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": f"{name}://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"{name}://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{name}:{name}",
            "inter.broker.listener.name": name,
            **self._sasl_properties(),
            "log.dirs": str(logs.resolve()),
            "num.partitions": str(self.settings.kafka.partitions),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # A misspelt topic must be an error, not a new empty topic.
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
        }
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / "server.properties"
        path.touch(mode=0o600)  # it may hold the SASL users' passwords
        path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        return path

    def _sasl_properties(self) -> dict[str, str]:
        """SASL/PLAIN with `sasl_users`; the broker talks to itself as the first one."""
        if not self.sasl_users:
            return {}
        (me, mine), *_ = self.sasl_users.items()
        users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
        jaas = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{me}" password="{mine}" {users};'
        )
        return {
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        }

    def _format(self, classpath: str, properties: Path) -> None:
        """`kafka-storage format`, once: a formatted directory keeps its cluster id."""
        if (self.data_dir / "data" / "meta.properties").is_file():
            return
        cluster_id = uuid.uuid4().hex[:22]
        result = subprocess.run(
            [java(), f"-Dlog4j2.configurationFile={LOG_CONFIG}", "-cp", classpath, STORAGE_TOOL,
             "format", "-t", cluster_id, "-c", str(properties)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise KafkaBrokerError(
                f"formatting {self.data_dir} for Kafka failed:\n"
                + (result.stdout + result.stderr).strip()[-2000:]
            )

    def _answers(self, probe: Settings) -> bool:
        try:
            existing_topics(probe)
        except SourceError:
            return False
        return True

    def banner(self) -> str:
        return (
            f"Kafka (KRaft) on {self.bootstrap_servers} — topics: "
            f"{', '.join(self.topics()) or 'none'} — data in {self.data_dir} — Ctrl-C stops it"
        )
