"""What the local GCS and Azure stores share: an emulator behind `ackfold_dev.store_proxy`,
in a process group of its own, on a free loopback port (or a given one), with its data in
a directory, so that it can be stopped, killed and started again on the same port with
what it answered kept (`LocalGCS`, `LocalAzure`)."""

from __future__ import annotations

import sys
import time
from abc import abstractmethod
from pathlib import Path

from ackfold.errors import AckfoldError
from ackfold_dev.ports import LOOPBACK, free_port, port_free
from ackfold_dev.server import JvmProcess, LocalServer


class LocalStoreError(AckfoldError, RuntimeError):
    """A local object store cannot start, or died."""


class PortTaken(LocalStoreError):
    """Another process holds the port the store was to listen on."""


# Tries for a store on a port of its own choosing: a free port may be taken by another
# process before the proxy binds it.
PORT_TRIES = 3


class EmulatedStore(LocalServer):
    """One emulator behind the store proxy on 127.0.0.1:`port`, data in `directory`,
    `container` (a bucket, an Azure container) created once it answers."""

    kind: str  # the proxy's --kind
    title: str  # for messages: "the local GCS API"

    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        container: str | None,
        in_memory: bool = False,
    ) -> None:
        self.directory = directory
        self.in_memory = in_memory
        self.port = port or free_port()
        # Until it first answers, a store whose port was not given may move to another.
        self._may_move = port is None
        self.container = container
        self._process = JvmProcess(self.title, directory / "proxy.log")

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def log_file(self) -> Path:
        """Where the proxy logs each request with its answer's status."""
        return self._process.log_file

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @abstractmethod
    def program(self) -> Path:
        """The installed emulator (`EmulatorMissing` if it is not)."""

    @abstractmethod
    def create_container(self, name: str) -> None:
        """Create bucket or container `name` (no error if it exists)."""

    @abstractmethod
    def env(self) -> dict[str, str]:
        """The store's standard variables that point delta-rs (and ackfold) at this server."""

    @abstractmethod
    def spark_conf(self) -> dict[str, str]:
        """Spark's settings for this server's Hadoop connector."""

    @abstractmethod
    def warehouse(self, path: str = "warehouse", container: str | None = None) -> str:
        """A warehouse URI in this server's container (or `container`), as Spark and
        ackfold spell it."""

    def start(self, timeout: float = 120) -> None:
        """Start the emulator and its proxy; return once it answers and the container
        exists. A store that chose its own port takes another if that one is taken before
        it first answers; a restart keeps its port."""
        for attempt in range(1, PORT_TRIES + 1):
            try:
                self._start(timeout)
            except PortTaken:
                if not self._may_move or attempt == PORT_TRIES:
                    raise
                self.port = free_port()
                continue
            self._may_move = False
            return

    def _start(self, timeout: float) -> None:
        from ackfold_dev.store_proxy import READY

        if self._process.running:
            raise LocalStoreError(f"{self.title} already runs on {self.endpoint_url}")
        program = self.program()
        if not port_free(self.port):
            raise PortTaken(
                f"port {self.port} on 127.0.0.1 is already taken: stop that process, or "
                "choose another port"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        args = ["-m", "ackfold_dev.proxy_process", "--kind", self.kind, "--port", str(self.port),
                "--root", str(self.directory / "data"), "--program", str(program),
                *(["--in-memory"] if self.in_memory else [])]  # fmt: skip
        self._process.start(args, command=sys.executable)
        try:
            deadline = time.monotonic() + timeout
            while READY.encode() not in self._process.logged():
                code = self._process.exit_code()
                if code is not None:
                    failure = self._process.failure(f"exited with {code}")
                    taken = b"Address already in use" in self._process.logged()
                    raise (PortTaken if taken else LocalStoreError)(failure)
                if time.monotonic() > deadline:
                    raise LocalStoreError(
                        self._process.failure(f"did not answer within {timeout:g} s")
                    )
                time.sleep(0.1)
            if self.container is not None:
                self.create_container(self.container)
        except BaseException:
            self.stop()
            raise

    def stop(self, grace: float = 20) -> None:
        """Stop the proxy, which stops the emulator once no write is in flight. Idempotent.

        Only the proxy gets SIGTERM: Azurite saves its metadata on its first SIGTERM and
        dies unsaved on a second, so the group's SIGTERM and the proxy's own lost every
        write of the last 5 s when the second came first."""
        self._process.stop(grace, leader_first=True)

    def kill(self) -> None:
        """SIGKILL the proxy and the emulator at once, as a crash would."""
        self._process.kill()

    def wait_for_exit(self) -> str:
        code = self._process.wait()
        return f"{self.title} exited with {code}; see {self._process.log_file}"

    def banner(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env().items())
        return (
            f"{self.title} on {self.endpoint_url} — point ackfold at it with:\n  {env} "
            f"ACKFOLD_WAREHOUSE={self.warehouse()}\nCtrl-C stops it"
        )
