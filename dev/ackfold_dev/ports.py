"""Free loopback ports, for the local servers ackfold starts (ElasticMQ, a Spark cluster).

Example:
    >>> port = free_port()
    >>> port_free(port)
    True
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

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
