"""A Spark standalone cluster on this machine, from the pyspark install: one master and
its workers, on loopback (`ackfold cluster`, `make cluster`, the cluster test tier).

Point ackfold at it with the one setting that switches local and cluster:
`ACKFOLD_SPARK__MASTER=spark://127.0.0.1:7077`. The master, the workers and the executors
the workers start all run in one process group, the master's: stopping the cluster stops
the group, so nothing is left running. Logs and the workers' work dirs are under the
cluster's directory (`<var_dir>/cluster` for `ackfold cluster`).

Example:
    >>> with LocalCluster(Path("var/cluster")) as cluster:  # doctest: +ELLIPSIS
    ...     cluster.master_url, len(cluster.state()["workers"])
    ('spark://127.0.0.1:...', 2)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

from ackfold.errors import AckfoldError
from ackfold_dev.ports import LOOPBACK, free_port, port_free
from ackfold_dev.server import LocalServer

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# Sized for the 2-core machines ackfold develops on: two workers of one core, each with
# room for one executor of Spark's default 1g.
DEFAULT_WORKERS = 2
DEFAULT_CORES = 1
DEFAULT_MEMORY = "2g"
# No REST submission server: it takes the fixed port 6066 (two clusters would clash), and
# ackfold submits in client mode.
_DAEMON_PROPERTIES = {
    "spark.master.rest.enabled": "false",
}


class ClusterError(AckfoldError, RuntimeError):
    """The local Spark cluster cannot start, or a daemon of it died."""


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark (bin/spark-class, jars/)."""
    import pyspark

    return Path(pyspark.__file__).parent


class LocalCluster(LocalServer):
    """A Spark standalone master and `workers` workers on `host`, under `base_dir`."""

    def __init__(
        self,
        base_dir: Path,
        *,
        workers: int = DEFAULT_WORKERS,
        cores: int = DEFAULT_CORES,
        memory: str = DEFAULT_MEMORY,
        port: int | None = None,
        webui_port: int | None = None,
        host: str = LOOPBACK,
    ) -> None:
        if workers < 1 or cores < 1:
            raise ClusterError("a cluster needs at least one worker of at least one core")
        if not re.fullmatch(r"\d+[mg]", memory):
            raise ClusterError(f"worker memory {memory!r} is not like 1g or 1536m")
        self.base_dir = base_dir.expanduser().resolve()
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.host = host
        self._fixed_ports = {"--port": port, "--webui-port": webui_port}
        self.port = port or 0
        self.webui_port = webui_port or 0
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []

    # -- where it is --------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        """What `spark.master` (ACKFOLD_SPARK__MASTER) should say to run on this cluster."""
        return f"spark://{self.host}:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://{self.host}:{self.webui_port}"

    @property
    def log_dir(self) -> Path:
        return self.base_dir / "logs"

    def work_dir(self, worker: int) -> Path:
        """Worker `worker`'s (1-based) work dir: one folder per app, per executor, with
        the executor's stdout and stderr."""
        return self.base_dir / "work" / f"worker-{worker}"

    @property
    def pid(self) -> int | None:
        """The master's process id, which is also the cluster's process group, while it runs."""
        return self._procs[0].pid if self._procs else None

    # -- what it says -------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The master's JSON status: workers, cores, active and completed applications."""
        return _get_json(f"{self.webui_url}/json/")

    def worker_states(self) -> list[dict[str, Any]]:
        """Each worker's JSON status, with its running and finished executors."""
        return [_get_json(f"{w['webuiaddress']}/json/") for w in self.state()["workers"]]

    # -- running ------------------------------------------------------------------------

    def start(self, timeout: float = 120) -> None:
        """Start the master and the workers; return once every worker is ALIVE at the
        master, or stop what started and raise `ClusterError` with the logs' ends."""
        if self._procs:
            raise ClusterError(f"the cluster already runs at {self.master_url}")
        for flag, fixed in self._fixed_ports.items():
            if fixed is not None and not port_free(fixed, self.host):
                raise ClusterError(
                    f"port {fixed} on {self.host} is already taken (another Spark master?): "
                    f"stop that process, or choose another with {flag}"
                )
        self.port = self.port or free_port(self.host)
        self.webui_port = self.webui_port or free_port(self.host)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        properties = self.base_dir / "spark-daemons.conf"
        properties.write_text("".join(f"{k} {v}\n" for k, v in _DAEMON_PROPERTIES.items()))
        common = ["--host", self.host, "--properties-file", str(properties)]
        try:
            self._spawn(
                "master",
                [MASTER_CLASS, *common, "--port", str(self.port),
                 "--webui-port", str(self.webui_port)],
            )  # fmt: skip
            # A worker that registers before the master leads is ignored, and retries only
            # 5 to 15 s later: start the workers once the master is ALIVE.
            deadline = time.monotonic() + timeout
            self._wait_alive(deadline, workers=0)
            for n in range(1, self.workers + 1):
                self.work_dir(n).mkdir(parents=True, exist_ok=True)
                self._spawn(
                    f"worker-{n}",
                    [WORKER_CLASS, *common, "--port", str(free_port(self.host)),
                     "--webui-port", str(free_port(self.host)), "--cores", str(self.cores),
                     "--memory", self.memory, "--work-dir", str(self.work_dir(n)),
                     self.master_url],
                )  # fmt: skip
            self._wait_alive(deadline, workers=self.workers)
        except BaseException:
            self.stop()
            raise

    def _spawn(self, name: str, args: list[str]) -> None:
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            # Every daemon binds its ports and its web UI on this address only.
            "SPARK_LOCAL_IP": self.host,
            "SPARK_DAEMON_MEMORY": "512m",
            # The daemons mostly wait: the C1 compiler alone starts them on less CPU.
            "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1",
        }
        log = (self.log_dir / f"{name}.log").open("ab")
        self._logs.append(log)
        # One group for all: the master leads it, the workers (and their executors) join.
        group = self._procs[0].pid if self._procs else 0
        try:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=env, stdout=log, stderr=subprocess.STDOUT, process_group=group,
            )  # fmt: skip
        except (PermissionError, ProcessLookupError):  # the master's group is gone: it died
            raise self._failure("master exited while the workers started") from None
        self._procs.append(proc)

    def _wait_alive(self, deadline: float, *, workers: int) -> None:
        """Until the master is ALIVE with `workers` ALIVE workers, or `ClusterError`."""
        started = time.monotonic()
        alive, status = 0, "not answering"
        while time.monotonic() < deadline:
            for name, proc in self._named_procs():
                if proc.poll() is not None:
                    raise self._failure(f"{name} exited with {proc.returncode}")
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                state = self.state()
                status = str(state.get("status"))
                alive = sum(w.get("state") == "ALIVE" for w in state.get("workers", []))
                if status == "ALIVE" and alive >= workers:
                    return
            time.sleep(0.25)
        raise self._failure(
            f"did not come up within {time.monotonic() - started:.0f} s (master "
            f"{status}, {alive} of {workers} worker(s) ALIVE at {self.webui_url}/json/)"
        )

    def _named_procs(self) -> list[tuple[str, subprocess.Popen[bytes]]]:
        names = ["master", *(f"worker-{n}" for n in range(1, self.workers + 1))]
        return list(zip(names, self._procs, strict=False))

    def _failure(self, what: str) -> ClusterError:
        parts = [f"the local Spark cluster failed: {what}."]
        for log in sorted(self.log_dir.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()
            # The messages, not the stack frames: a JVM failure is mostly "\tat ..." lines.
            tail = [line for line in lines if not line.lstrip().startswith("at ")][-10:]
            parts.append(f"The end of {log}:\n" + "\n".join(tail))
        return ClusterError("\n".join(parts))

    def stop(self, grace: float = 15) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after `grace` s. Idempotent."""
        procs, self._procs = self._procs, []
        if procs:
            group = procs[0].pid
            _signal_group(group, signal.SIGTERM)
            deadline = time.monotonic() + grace
            for proc in procs:
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    break
            # Whatever is left (a daemon, an executor, a Python worker) goes now.
            _signal_group(group, signal.SIGKILL)
            for proc in procs:
                proc.wait()
        for log in self._logs:
            log.close()
        self._logs = []

    def banner(self) -> str:
        return (
            f"Spark standalone cluster: master {self.master_url}, UI {self.webui_url}, "
            f"{self.workers} worker(s) of {self.cores} core(s) and {self.memory} — "
            f"Ctrl-C stops it\n"
            f"  run ackfold on it:   export ACKFOLD_SPARK__MASTER={self.master_url}\n"
            f"  logs and work dirs:  {self.base_dir}"
        )

    def wait_for_exit(self) -> str:
        while True:
            for name, proc in self._named_procs():
                if proc.poll() is not None:
                    return f"the Spark {name} exited with {proc.returncode}; see {self.log_dir}"
            time.sleep(1)


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback)
        data: dict[str, Any] = json.load(response)
        return data


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
