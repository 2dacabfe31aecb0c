"""What the benchmark scripts share: the synthetic ledger's shape, fresh ledgers in a work
directory that reuse the project's jar cache, and a warm Spark session."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings, load_settings
from ackfold.ledger.schema.tables import Ledger
from ackfold.runs.reconcile import reconcile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proc_cpu import cpu_seconds, stat_fields
from synth import Synthetic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FANOUT, DEPTH = 2, 2  # 8 events per root: the default synthetic tree


class CpuClock:
    """CPU-seconds (user + system) spent so far by this process and, in a classic session,
    by Spark's JVM: on a machine other work also loads, a cost that the load moves less
    than wall-clock time. Through Spark Connect the JVM is the server's: this process only.
    """

    def __init__(self, spark: SparkSession | None = None) -> None:
        self.jvm_pid: int | None = None
        if spark is not None and not type(spark).__module__.startswith("pyspark.sql.connect"):
            gateway = spark.sparkContext._gateway
            assert gateway is not None
            self.jvm_pid = int(gateway.jvm.java.lang.ProcessHandle.current().pid())

    def jvm(self) -> float:
        """The JVM's CPU-seconds so far (0 without one)."""
        if self.jvm_pid is None:
            return 0.0
        return cpu_seconds(stat_fields(Path(f"/proc/{self.jvm_pid}/stat")))

    def __call__(self) -> float:
        """This process's and the JVM's CPU-seconds so far."""
        times = os.times()
        return times.user + times.system + self.jvm()


def per_second(rate: float) -> float:
    """A rate for a summary, to 3 significant figures: a tiny run on a busy machine can
    go slower than one a second, and must not read as 0."""
    return float(f"{rate:.3g}")


def roots_for(events: int, fanout: int = FANOUT, depth: int = DEPTH) -> int:
    """How many synthetic roots make about `events` events."""
    return events // Synthetic(roots=1, fanout=fanout, depth=depth).events_per_root


class Workdir:
    """Ledgers under one directory (a temp dir unless given), each with fresh settings."""

    def __init__(self, path: str | None, prefix: str) -> None:
        self.path = Path(path or tempfile.mkdtemp(prefix=prefix))
        self.jars = load_settings().jars_dir  # the project's jar cache, wherever ledgers go

    def settings(self, name: str, **overrides: Any) -> Settings:
        """Settings of an empty ledger `name` (anything left there is removed first)."""
        self.remove(name)
        return load_settings(var_dir=self.path / name, jars_dir=self.jars, **overrides)

    def remove(self, name: str) -> None:
        shutil.rmtree(self.path / name, ignore_errors=True)


def reconcile_after(
    spark: SparkSession, settings: Settings, synthetic: Synthetic
) -> dict[str, Any]:
    """The real reconcile, an hour after the last root of `synthetic` started."""
    return reconcile(spark, settings, now=synthetic.end + timedelta(hours=1))


WARM_UP_ROOTS = 20_000


def warm_up(spark: SparkSession, work: Workdir, roots: int = WARM_UP_ROOTS) -> None:
    """A small ledger written and reconciled: JIT and Delta's code paths get hot. With no
    roots, nothing: the suite's tiny runs check that a script works, not its figures."""
    if roots == 0:
        return
    settings = work.settings("warmup")
    synthetic = Synthetic(roots=roots, fanout=FANOUT, depth=DEPTH)
    synthetic.write(spark, Ledger(settings.table_root))
    reconcile_after(spark, settings, synthetic)
    work.remove("warmup")
