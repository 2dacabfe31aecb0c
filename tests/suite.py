"""What one test run shares across its xdist workers, and how it checks it left nothing behind.

- **Groups.** `make test` runs the tiers side by side (`pytest -n ... --dist loadgroup`).
  Each tier that needs a JVM joins a group, and a group runs on one worker, in order: the
  Spark session a group shares starts once for it, and the groups that compete for the two
  cores are few. The fast tiers are spread over whichever worker is free.
- **Shared servers.** A server that several groups use (ElasticMQ, the Kafka broker) is
  started once per run by the first worker that asks for it, in a process group of its own,
  and recorded in the run's directory; every other worker attaches to it. The controller
  stops them all at the end (`stop_shared_servers`).
- **Clean exits.** Every process a test starts inherits `RUN_MARKER` in its environment
  (the embedded stack and spark-submit strip `ACKFOLD_*` and `AIRFLOW*`, so the marker is
  named otherwise). At the end the controller lists the marked processes still alive:
  a Chromium, a JVM, an Airflow or a broker left running fails the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

RUN_MARKER = "PYTEST_ACKFOLD_RUN"
RUN_DIR = "PYTEST_ACKFOLD_RUN_DIR"


def run_dir() -> Path:
    """This run's directory, shared by the controller and its workers."""
    return Path(os.environ[RUN_DIR])


def _servers_dir() -> Path:
    path = run_dir() / "servers"
    path.mkdir(parents=True, exist_ok=True)
    return path


def shared_server(name: str, start: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The record of server `name` for this run: `start()` runs in the first worker that
    asks (under a lock) and returns what the others need to attach, with `pgid`, the process
    group the controller stops at the end."""
    from filelock import FileLock

    record = _servers_dir() / f"{name}.json"
    with FileLock(str(record.with_suffix(".lock"))):
        if not record.exists():
            info = start()
            assert isinstance(info.get("pgid"), int), f"{name}: start() must return its pgid"
            record.write_text(json.dumps(info))
        loaded: dict[str, Any] = json.loads(record.read_text())
        return loaded


def stop_shared_servers(grace: float = 15) -> list[str]:
    """Stop every server this run started (SIGTERM to its group, SIGKILL after `grace` s);
    the names of those stopped."""
    if RUN_DIR not in os.environ or not _servers_dir().exists():
        return []
    stopped = []
    for record in sorted(_servers_dir().glob("*.json")):
        pgid = int(json.loads(record.read_text())["pgid"])
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.2)
        _signal_group(pgid, signal.SIGKILL)
        stopped.append(record.stem)
    return stopped


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def marked_processes(token: str, *, exclude: set[int]) -> dict[int, str]:
    """Live processes (pid -> command line) that carry `RUN_MARKER=token`, but `exclude`."""
    needle = f"{RUN_MARKER}={token}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in exclude:
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            status = (entry / "status").read_text()
            if "\nState:\tZ" in status:  # a zombie has exited; its parent has not reaped it
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        found[int(entry.name)] = b" ".join(argv).decode(errors="replace")[:200]
    return found


def ancestors() -> Iterator[int]:
    """This process and its parents (make, the shell that ran it): marked, and rightly alive."""
    pid = os.getpid()
    while pid > 1:
        yield pid
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return
        pid = int(stat.rsplit(")", 1)[1].split()[1])


def leftovers(token: str, wait: float = 30) -> dict[int, str]:
    """The marked processes still alive after up to `wait` s (a teardown may be finishing)."""
    exclude = set(ancestors())
    deadline = time.monotonic() + wait
    found = marked_processes(token, exclude=exclude)
    while found and time.monotonic() < deadline:
        time.sleep(0.5)
        found = marked_processes(token, exclude=exclude)
    return found


def orphans(token: str) -> dict[int, tuple[str, float]]:
    """Marked processes of this worker (its xdist id in their environment) whose parent has
    gone, as a JVM whose Python driver left without stopping it: pid -> (command line, CPU
    seconds so far). Nothing reaps them into a test's tree, so their CPU is in no tier's:
    found at each test's end, and listed with the test that was running. An orphan is
    adopted by init (pid 1): only those are read further, a scan takes milliseconds."""
    needle = f"{RUN_MARKER}={token}".encode()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            # state, parent, process group; then user and system time in clock ticks
            if fields[1] != b"1" or fields[0] == b"Z":
                continue
            environ = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            if needle not in environ:
                continue
            workers = [item for item in environ if item.startswith(b"PYTEST_XDIST_WORKER=")]
            if workers != ([f"PYTEST_XDIST_WORKER={worker}".encode()] if worker else []):
                continue
            if int(fields[2]) in _server_groups():
                continue
            argv = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
            seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            found[int(name)] = (argv.decode(errors="replace")[:160], seconds)
        except (OSError, IndexError, ValueError):
            continue
    return found


def _server_groups() -> set[int]:
    """The process groups of the run's shared servers (they outlive every test)."""
    if RUN_DIR not in os.environ or not _servers_dir().exists():
        return set()
    groups = set()
    for record in _servers_dir().glob("*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            groups.add(int(json.loads(record.read_text())["pgid"]))
    return groups


def kill(pids: dict[int, str]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def tree_cpu_seconds() -> float:
    """The CPU time (user and system) spent so far by this process and every process below
    it, the exited ones included once reaped: the 2 cores are what the suite runs out of."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for process in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def machine_cpu() -> tuple[float, float]:
    """(the CPU seconds the whole machine has spent busy, a monotonic clock): counts what
    `tree_cpu_seconds` misses, such as a JVM that outlived the script that started it."""
    import psutil

    times = psutil.cpu_times()
    busy = (
        times.user
        + times.system
        + sum(getattr(times, name, 0.0) for name in ("nice", "irq", "softirq"))
    )  # guest time is counted in user already
    return busy, time.monotonic()


def find_python(version: str) -> str | None:
    """An interpreter of `version` ("3.12") that runs: on PATH, or a pyenv installation
    (a pyenv shim on PATH runs only the version that pyenv has selected)."""
    import glob
    import shutil
    import subprocess

    pyenv = os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")
    candidates = [shutil.which(f"python{version}"), *sorted(glob.glob(pyenv))]
    for candidate in filter(None, candidates):
        try:
            found = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
        except OSError:
            continue
        if found.returncode == 0 and found.stdout.strip() == version:
            return candidate
    return None
