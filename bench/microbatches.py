"""What each micro-batch of a streaming query did, read from Spark itself.

- From every session (classic or Spark Connect): the query's `StreamingQueryProgress`,
  one per micro-batch: `numInputRows` (the micro-batch's size, as Spark saw it) and
  `durationMs`, Spark's own split of the trigger (`latestOffset`, `getBatch`,
  `queryPlanning`, `addBatch` (the foreachBatch function: every job the stage runs),
  `walCommit`, `commitOffsets`, `triggerExecution` the whole).
- In a classic session, around each call of the batch function: the Spark jobs it ran
  (their ids are consecutive: the query runs alone in the benchmark's process), their
  stages and tasks, input rows, shuffle bytes and executor CPU from Spark's status
  store (what the UI's REST API serves, read through the driver's JVM: a SparkListener is
  not reachable from PySpark), and code generation: the classes Janino compiled
  (`CodegenMetrics.METRIC_COMPILATION_TIME`'s count) and the time it took
  (`CodeGenerator.compileTime`, nanoseconds, exact).

Through Spark Connect the batch function runs in the server: progress only.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proc_cpu import cpu_seconds, stat_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

# Spark's names in durationMs, in the order a trigger runs them.
DURATIONS = (
    "latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets",
    "triggerExecution",
)  # fmt: skip
# What the status store and the codegen metrics add, per batch function call.
JOB_FIELDS = (
    "jobs", "stages", "tasks", "input_rows", "shuffle_read_bytes", "shuffle_write_bytes",
    "executor_cpu_ms", "codegen_classes", "codegen_ms",
)  # fmt: skip

Batch = Callable[["DataFrame", int], None]
Snapshot = tuple[int, int, int]  # SparkCounters.snapshot()


class SparkCounters:
    """What a classic session's driver JVM has counted so far: Spark jobs started, and
    classes compiled by code generation and the nanoseconds it took. Two snapshots
    bracket some work; `figures` reads what that work ran from Spark's status store."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm = spark.sparkContext._jvm
        self._sc = spark.sparkContext._jsc.sc()

    def snapshot(self) -> Snapshot:
        """(the next job's id, classes compiled so far, nanoseconds compiling so far)."""
        codegen = self._jvm.org.apache.spark.sql.catalyst.expressions.codegen  # type: ignore[union-attr]
        count = self._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
        nanos = getattr(getattr(codegen, "CodeGenerator$"), "MODULE$").compileTime()
        next_job = self._sc.dagScheduler().numTotalJobs()
        return int(next_job), int(count.METRIC_COMPILATION_TIME().getCount()), int(nanos)

    def figures(self, before: Snapshot, after: Snapshot) -> dict[str, float]:
        """Each of `JOB_FIELDS` for the jobs started between two snapshots (consecutive
        ids: nothing else may run meanwhile), once the listener bus has delivered them."""
        self._sc.listenerBus().waitUntilEmpty()
        store = self._sc.statusStore()
        stage_ids: set[int] = set()
        for job_id in range(before[0], after[0]):
            stage_ids.update(int(s) for s in _seq(store.job(job_id).stageIds()))
        totals = dict.fromkeys(JOB_FIELDS, 0.0)
        totals.update(jobs=after[0] - before[0], stages=len(stage_ids))
        for stage_id in stage_ids:
            for attempt in _seq(store.stageData(stage_id, False, None, False, None)):
                totals["tasks"] += attempt.numTasks()
                totals["input_rows"] += attempt.inputRecords()
                totals["shuffle_read_bytes"] += attempt.shuffleReadBytes()
                totals["shuffle_write_bytes"] += attempt.shuffleWriteBytes()
                totals["executor_cpu_ms"] += attempt.executorCpuTime() / 1e6
        totals["codegen_classes"] = after[1] - before[1]
        totals["codegen_ms"] = (after[2] - before[2]) / 1e6
        return totals


class MicroBatches:
    """Records each micro-batch of the queries it is shown (`watch`), and, in a classic
    session, what the batch functions it wraps (`wrap`) ran."""

    def __init__(self, spark: SparkSession) -> None:
        self.queries: list[tuple[str, StreamingQuery]] = []
        # (stage, batch id) -> the counters before and after the batch function's call
        self.calls: dict[tuple[str, int], tuple[Snapshot, Snapshot]] = {}
        self.counters: SparkCounters | None = None
        if not type(spark).__module__.startswith("pyspark.sql.connect"):
            self.counters = SparkCounters(spark)

    def watch(self, stage: str, query: StreamingQuery) -> StreamingQuery:
        """Remember `query`, a run of `stage`: its progress is read in `batches()`."""
        self.queries.append((stage, query))
        return query

    def wrap(self, stage: str, batch: Batch) -> Batch:
        """`batch`, recording the jobs and code generation of each call (classic only;
        through Connect the function must stay a plain picklable one: it is `batch`)."""
        counters = self.counters
        if counters is None:
            return batch

        def recorded(frame: DataFrame, batch_id: int) -> None:
            before = counters.snapshot()
            batch(frame, batch_id)
            self.calls[(stage, batch_id)] = (before, counters.snapshot())

        return recorded

    def batches(self) -> list[dict[str, Any]]:
        """One dict per micro-batch that read rows, in the order they ran: the stage, the
        batch id, `rows` and each of `DURATIONS` (ms), and in a classic session each of
        `JOB_FIELDS`."""
        counters = self.counters
        jobs = {} if counters is None else {k: counters.figures(*v) for k, v in self.calls.items()}
        seen: list[dict[str, Any]] = []
        for stage, query in self.queries:
            for progress in query.recentProgress:
                if not progress.numInputRows:
                    continue  # availableNow's last, empty trigger
                row: dict[str, Any] = {
                    "stage": stage, "batch_id": progress.batchId, "rows": progress.numInputRows,
                }  # fmt: skip
                durations = progress.durationMs
                row.update({name: durations.get(name, 0) for name in DURATIONS})
                row.update(jobs.get((stage, progress.batchId), {}))
                seen.append(row)
        return seen


def _seq(seq: Any) -> list[Any]:
    """A Scala Seq from py4j as a list."""
    return [seq.apply(i) for i in range(seq.size())]


def median_batch(batches: list[dict[str, Any]], stage: str) -> dict[str, float]:
    """Each figure's median over `stage`'s micro-batches (each column on its own)."""
    mine = [b for b in batches if b["stage"] == stage]
    if not mine:
        return {}
    keys = [k for k in mine[0] if k not in ("stage", "batch_id")]
    return {k: statistics.median(b.get(k, 0) for b in mine) for k in keys}


def tree_cpu_seconds(pid: int | None = None) -> float:
    """CPU-seconds (user + system) of process `pid` (this one by default) and every process
    under it, from /proc: the live ones' own time, plus the time of those that ended and
    were waited for (`cutime`, `cstime`). For a PySpark driver: its Python, the JVM it
    started, and PySpark's Python workers under the JVM."""
    root = os.getpid() if pid is None else pid
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = stat_fields(entry / "stat")
        except OSError:
            continue  # ended while we looked
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = cpu_seconds(fields, waited_children=True)
    total = 0.0
    for process, cpu in times.items():
        ancestor: int | None = process
        while ancestor is not None and ancestor != root:
            ancestor = parents.get(ancestor)
        if ancestor == root:
            total += cpu
    return total
