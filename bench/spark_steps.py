"""The Spark engine's reconcile, step by step: Spark jobs, wall and CPU seconds per step.

    .venv/bin/python bench/spark_steps.py [--events 1000000] [--workdir DIR] [--jobs] [--threads]

Writes a ledger of `--events` events (`arrow_ledger.py`, no JVM), then runs one
reconcile on the Spark engine in this process (`run_reconcile`, as `ackfold reconcile`
runs it: the lease, the quiet check, the claim, then `Reconciler.run`), with each step of
`Reconciler` in a Spark job group of its own. The jobs are counted from Spark's event log
(`spark.eventLog.enabled`: every job, with its group and its stages' call sites), so the
counts are exact whatever the machine's load; the seconds are not, on a shared machine.
`--jobs` also prints each job's first stage name, to see what Delta runs and where.
`--threads` prints the JVM's CPU seconds by kind of thread (its task threads, its JIT
compilers, Py4J's threads, where the driver's planning and Delta's log work run, its GC),
sampled from `/proc` every half second, so that threads the JVM ends early still count.
Prints one line per step and a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkout  # noqa: F401  (before settings load: the checkout's var/)
from arrow_ledger import ArrowLedger
from proc_cpu import cpu_seconds, stat_fields

from ackfold.ledger.commits.writer import LedgerWriter

NONE = "(no group)"
_times: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
_group: list[str] = []


def _cpu() -> float:
    """CPU seconds of this process and of its children (the JVM is not waited for: read
    from /proc, its user and system ticks)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    total = own.ru_utime + own.ru_stime
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is not None:
        pid = _jvm_pid()
        if pid:
            total += cpu_seconds(stat_fields(Path(f"/proc/{pid}/stat")))
    return total


_pid: list[int] = []


def _jvm_pid() -> int | None:
    if not _pid:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is None:
            return None
        _pid.append(int(sc._jvm.ProcessHandle.current().pid()))  # type: ignore[union-attr]
    return _pid[0]


@contextmanager
def step(name: str) -> Iterator[None]:
    """Run the block with `name` as the Spark job group; time it, wall and CPU."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    outer = _group[-1] if _group else None
    _group.append(name)
    if sc is not None:
        sc.setJobGroup(name, name)
    wall, cpu = time.perf_counter(), _cpu()
    try:
        yield
    finally:
        wall, cpu = time.perf_counter() - wall, _cpu() - cpu
        _times[name][0] += wall
        _times[name][1] += cpu
        if outer is not None:  # the outer step does not count the inner one's time
            _times[outer][0] -= wall
            _times[outer][1] -= cpu
        _group.pop()
        if sc is not None:
            if outer is None:
                sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            else:
                sc.setJobGroup(outer, outer)


def wrap(owner: Any, attr: str, name: str) -> None:
    original: Callable[..., Any] = getattr(owner, attr)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with step(name):
            return original(*args, **kwargs)

    setattr(owner, attr, wrapped)


def instrument() -> None:
    from ackfold.engines import spark as engine
    from ackfold.reconcile import reconciler
    from ackfold.reconcile.reconciler import Reconciler

    wrap(engine.SparkEngine, "session", "session start")
    wrap(reconciler, "upgrade_root_state", "upgrade check")
    wrap(reconciler, "create_tables", "create_tables")
    wrap(Reconciler, "_oldest_event", "oldest new event")
    wrap(reconciler, "open_state", "open_state (read root_state)")
    wrap(reconciler, "known_roots", "known_roots (read root_state)")
    wrap(Reconciler, "_waiting_events", "read unmatched_events")
    wrap(Reconciler, "_registrations", "read roots")
    wrap(Reconciler, "step", "fold (cache, oldest fold)")
    wrap(reconciler, "_totals", "_totals")
    wrap(Reconciler, "_drop_copies_of_settled", "copies of settled roots")
    wrap(reconciler, "merge_updates", "merge_updates")
    wrap(reconciler, "append_new", "append_new")
    wrap(Reconciler, "_park", "park (overwrite unmatched_events)")
    wrap(reconciler, "explain_timeouts", "explain_timeouts")
    wrap(reconciler, "commit_mark", "commit_mark")
    wrap(Reconciler, "summary", "summary")


class ThreadCpu:
    """The JVM's CPU seconds per thread, sampled from /proc/<pid>/task until `stop`: the
    last figure of every thread seen, grouped by its name with the digits taken out
    ("C2 CompilerThread0" and "C1 CompilerThread1": "C# CompilerThread#"; Linux keeps 15
    characters of a name)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[str, float]] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.5):
            pid = _jvm_pid()
            if pid is None:
                continue
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    name = (task / "comm").read_text().strip()
                    fields = stat_fields(task / "stat")
                except OSError:  # the thread ended between the listing and the read
                    continue
                self._last[task.name] = (name, cpu_seconds(fields))

    def stop(self) -> dict[str, float]:
        self._done.set()
        self._thread.join()
        kinds: Counter[str] = Counter()
        for name, cpu in self._last.values():
            kinds[re.sub(r"\d+", "#", name)] += cpu
        return {kind: round(cpu, 2) for kind, cpu in kinds.most_common()}


def jobs_by_group(log_dir: Path) -> tuple[Counter[str], dict[str, list[str]]]:
    """Jobs per job group, and each group's jobs' first stage names, from the event log."""
    counts: Counter[str] = Counter()
    names: dict[str, list[str]] = defaultdict(list)
    for path in sorted(p for p in log_dir.rglob("*") if p.is_file() and "appstatus" not in p.name):
        with path.open() as handle:
            for line in handle:
                event = json.loads(line)
                if event.get("Event") != "SparkListenerJobStart":
                    continue
                properties = event.get("Properties") or {}
                group = properties.get("spark.jobGroup.id") or NONE
                said = properties.get("spark.job.description") or ""
                counts[group] += 1
                stages = event.get("Stage Infos") or []
                first = min(stages, key=lambda s: s["Stage ID"])["Stage Name"] if stages else ""
                said = "" if said == group else f"{said.removeprefix(f'Delta: {group}: ')}; "
                names[group].append(f"{len(stages)} stage(s): {said}{first}")
    return counts, names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the ledger")
    parser.add_argument("--workdir", default=None, help="where the ledger goes")
    parser.add_argument("--jobs", action="store_true", help="print every job's first stage")
    parser.add_argument("--threads", action="store_true", help="the JVM's CPU by thread kind")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ackfold-steps-"))
    from ackfold.config import load_settings

    jars = str(load_settings().jars_dir)  # the checkout's (`make setup`), before the run's own
    var = work / "steps-var"  # not `var/`: a workdir may be where the caller's var/ is
    shutil.rmtree(var, ignore_errors=True)
    synthetic = ArrowLedger(roots=max(args.events // 8, 1))
    writer = LedgerWriter(var / "warehouse")
    writer.create()
    events = synthetic.write(writer)
    expected = synthetic.expected()
    log_dir = work / "eventlog"
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    conf = json.loads(os.environ.get("ACKFOLD_SPARK__CONF") or "{}")
    conf.update(
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": log_dir.as_uri(),
            "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false",
        }
    )
    os.environ.update(
        ACKFOLD_VAR_DIR=str(var),
        ACKFOLD_JARS_DIR=jars,
        ACKFOLD_ENGINE__KIND="spark",
        ACKFOLD_SPARK__CONF=json.dumps(conf),
    )
    settings = load_settings()
    instrument()
    from ackfold.runs.reconcile import run_reconcile

    now = synthetic.end + timedelta(hours=1)
    threads = ThreadCpu() if args.threads else None
    wall, cpu = time.perf_counter(), _cpu()
    summary = run_reconcile(settings, now=now)
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    jvm_threads = threads.stop() if threads is not None else {}
    found = {k: v for k, v in summary["by_status"].items() if v}
    if found != {k: v for k, v in expected.items() if v}:
        sys.exit(f"found {found}, the ledger holds {expected}")
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()  # the event log is complete once the context stops
    counts, names = jobs_by_group(log_dir)
    print(f"{events:,} events, {synthetic.roots:,} roots; load {os.getloadavg()}")
    print(f"{'step':<36} {'jobs':>5} {'wall s':>8} {'CPU s':>8}")
    rows = {}
    for name in [*_times, *(g for g in counts if g not in _times)]:
        seconds = _times.get(name, [0.0, 0.0])
        print(f"{name:<36} {counts.get(name, 0):>5} {seconds[0]:>8.2f} {seconds[1]:>8.2f}")
        rows[name] = {"jobs": counts.get(name, 0), "wall": seconds[0], "cpu": seconds[1]}
        if args.jobs:
            for job in names.get(name, []):
                print(f"    {job}")
    total = sum(counts.values())
    print(f"{'whole run':<36} {total:>5} {wall:>8.2f} {cpu:>8.2f}")
    if jvm_threads:
        print(f"the JVM's CPU by thread, {sum(jvm_threads.values()):.1f} s in all:")
        for kind, seconds in jvm_threads.items():
            if seconds >= 0.1:
                print(f"    {kind:<20} {seconds:>8.2f}")
    print(
        json.dumps(
            {"events": events, "steps": rows, "jobs": total, "wall": wall, "cpu": cpu}
            | ({"jvm_threads": jvm_threads} if args.threads else {})
        )
    )
    os._exit(0)  # delta-rs may abort at the interpreter's exit: the figures are out


if __name__ == "__main__":
    main()
