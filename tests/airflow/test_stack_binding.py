"""`make run` listens on loopback only, and says where: every socket any of its processes
listens on (Airflow's components, ElasticMQ, the demo) is on 127.0.0.1 or ::1, none on the
log servers' ports, and the banner names the address."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from tests.embedded_stack import Stack


def on_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)


def _address(hex_address: str) -> tuple[str, int]:
    """An address of /proc/net/tcp{,6} as text and its port."""
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        return ".".join(str(b) for b in raw[::-1]), int(port, 16)
    # IPv6: four 32-bit words, each in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words)), int(port, 16)


def listening() -> dict[int, tuple[str, int]]:
    """Socket inode -> (address, port) of every listening TCP socket on this machine."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                found[int(fields[9])] = _address(fields[1])
    return found


def descendants(root: int) -> list[int]:
    """`root` and every live process below it (by parent pid: Airflow's components set
    their process titles, which overwrites the environment a marker would be read from)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid ...: comm may hold spaces and parentheses.
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [root], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def test_make_run_listens_on_loopback_only_and_says_where(stack: Stack) -> None:
    port = int(stack.url.rsplit(":", 1)[1])
    printed = stack.wait_for_log("listening on", 60)
    assert f"listening on 127.0.0.1:{port} (this machine only" in printed
    assert "Kafka" not in printed, "no app reads Kafka: nothing to say about it"
    sockets = listening()
    bound: list[tuple[int, str, int]] = []
    for pid in descendants(stack.make.pid):
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[len("socket:[") : -1])
                if inode in sockets:
                    bound.append((pid, *sockets[inode]))
    assert any(p == port for _, _, p in bound), "the api-server's socket was not found"
    wide = [b for b in bound if not on_loopback(b[1])]
    assert wide == [], f"listening beyond loopback: {wide}"
    assert not [b for b in bound if b[2] in (8793, 8794)], "a log server listens"
