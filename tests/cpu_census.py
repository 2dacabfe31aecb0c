"""Where the machine's CPU went during a test run, by kind of process.

The tier table counts what each test's process tree spent; the machine spends more (90
CPU-minutes against 75 in one run). The rest goes to processes no test accounts for: a JVM
that outlived its script, the shared servers, the xdist workers between tests. The
controller samples every process on the machine every few seconds and sums, per kind of
process, what each spent while the run lasted. A process that lived less than one sample
is missed here; its CPU is in the machine's total.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import defaultdict
from pathlib import Path

import psutil

SAMPLE_SECONDS = 2.0
_JAVA_MAINS = {
    "org.apache.spark.deploy.SparkSubmit": "spark-submit",
    "org.apache.spark.deploy.master.Master": "spark master",
    "org.apache.spark.deploy.worker.Worker": "spark worker",
    "org.apache.spark.executor.CoarseGrainedExecutorBackend": "spark executor",
    "org.elasticmq.server.Main": "elasticmq",
    "kafka.Kafka": "kafka broker",
}


def kind(argv: list[str]) -> str:
    """A short name for the process `argv`: what it runs, not its arguments."""
    if not argv:
        return "?"
    program = Path(argv[0]).name
    if program == "java":
        for token in argv:
            for main, name in _JAVA_MAINS.items():
                if token.endswith(main) or token == main:
                    return f"java {name}{_spark_app(argv) if name == 'spark-submit' else ''}"
            if token.endswith(".jar") and argv[argv.index(token) - 1] == "-jar":
                return f"java -jar {Path(token).name}"
        return "java (other)"
    if program.startswith("python"):
        rest = argv[1:]
        if "-c" in rest:  # execnet starts xdist's workers with a one-line bootstrap
            code = rest[rest.index("-c") + 1] if rest.index("-c") + 1 < len(rest) else ""
            return "pytest xdist worker" if "sys.stdin.readline" in code else "python -c"
        if rest[:1] == ["-m"] and len(rest) > 1:
            return f"python -m {rest[1]}{_sub(rest[2:])}"
        script = next((a for a in rest if not a.startswith("-")), "")
        return f"python {Path(script).name}{_sub(rest[rest.index(script) + 1 :] if script else [])}"
    if program in ("airflow", "ackfold", "pytest", "moto_server"):
        return f"{program}{_sub(argv[1:])}"
    if "chrom" in program:
        return "chromium"
    return program


def _sub(rest: list[str]) -> str:
    """The subcommand (`airflow scheduler`), if the next argument is one."""
    word = next((a for a in rest if not a.startswith("-")), "")
    return f" {word}" if word.isidentifier() or word.replace("-", "").isalpha() else ""


def _spark_app(argv: list[str]) -> str:
    """The application a spark-submit runs: its Python file, or a py4j driver's shell."""
    for token in reversed(argv):
        if token.endswith(".py"):
            return f" {Path(token).name}"
        if token == "pyspark-shell":
            return " (in-process driver)"
        if token == "org.apache.spark.sql.connect.service.SparkConnectServer":
            return " (connect server)"
    return ""


class CpuCensus:
    """Samples the machine's processes from a thread until `stop()`."""

    def __init__(self) -> None:
        # (pid, start time) -> [kind, CPU seconds when first seen, CPU seconds when last seen]
        self.seen: dict[tuple[int, float], list] = {}
        self._stop = threading.Event()
        self._sample(first=True)
        self._thread = threading.Thread(target=self._run, name="cpu-census", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self._sample(first=False)

    def _sample(self, *, first: bool) -> None:
        for process in psutil.process_iter(["pid", "create_time", "cmdline", "cpu_times"]):
            with contextlib.suppress(psutil.Error, TypeError):
                info = process.info
                times = info["cpu_times"]
                if times is None:
                    continue
                cpu = times.user + times.system
                key = (info["pid"], info["create_time"])
                entry = self.seen.get(key)
                # A zombie has no command line left: it keeps the name it had.
                name = kind(info["cmdline"]) if info["cmdline"] else None
                if entry is None:
                    # A process already running at the start counts from then on only.
                    self.seen[key] = [name or "?", cpu if first else 0.0, cpu]
                else:
                    # Named by what it runs last: spark-submit's bash execs its JVM.
                    entry[0], entry[2] = name or entry[0], cpu

    def stop(self) -> dict[str, tuple[float, int]]:
        """CPU seconds and process count per kind, most first (this process excluded:
        its tests' time is in the tier table)."""
        self._stop.set()
        self._thread.join(timeout=10)
        self._sample(first=False)
        by_kind: dict[str, list] = defaultdict(lambda: [0.0, 0])
        me = os.getpid()
        for (pid, _), (name, start, last) in self.seen.items():
            spent = last - start
            if pid == me or spent <= 0.05:
                continue
            by_kind[name][0] += spent
            by_kind[name][1] += 1
        return {
            name: (cpu, count)
            for name, (cpu, count) in sorted(by_kind.items(), key=lambda kv: -kv[1][0])
        }
