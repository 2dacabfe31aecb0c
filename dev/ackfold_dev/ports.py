"""Free loopback ports, for the local servers ackfold starts (ElasticMQ, a Spark cluster).

Example:
    >>> port = free_port()
    >>> port_free(port)
    True
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Protocol

LOOPBACK = "127.0.0.1"


def port_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether a server could bind `host:port` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the JVM binds: a closed connection in TIME_WAIT must not count as taken.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = LOOPBACK) -> int:
    """A port nobody listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def port_held(port: int, host: str = LOOPBACK) -> Iterator[None]:
    """Keep `host:port` bound but not listening, for a test of a server that is down: a
    connect there is refused at once, and no other process takes the port meanwhile (a
    port just freed may be the kernel's next pick for anyone's port 0, and a stranger's
    server there answers in its own words)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        # The stopped server's closed connections linger in TIME_WAIT on this port.
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind((host, port))
        yield


class _Stoppable(Protocol):
    def stop(self) -> None: ...


class Downtime:
    """A server that goes down mid-run in a test: the first call stops it and holds its
    port (`port_held`) until `end`; later calls do nothing. Pass it as a callback (a
    replay's `after_send`), then `end` it before starting the server again."""

    def __init__(self, server: _Stoppable, port: int) -> None:
        self.server = server
        self.port = port
        self._held: ExitStack | None = None

    def __call__(self, *_: object) -> None:
        if self._held is None:
            self.server.stop()
            self._held = ExitStack()
            self._held.enter_context(port_held(self.port))

    def end(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None
