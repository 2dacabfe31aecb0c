"""Reconcile benchmark: ackfold's reconcile as a user runs it, against DuckDB's bare fold.

    .venv/bin/python bench/reconcile.py [--sizes 10000000,50000000] [--runs 3]
        [--spark-sizes 10000000] [--spark-masters local[1],local[2],spark://HOST:7077@4]
        [--increment 1000000] [--histories 0,10000000,50000000]
        [--workdir DIR] [--plot var/bench/bench-reconcile.png]

Every figure is a whole command in a fresh process, its start included, timed from
outside with its peak memory (the largest resident set of the process):

- `ackfold reconcile` on the embedded engine (the default), on a ledger whose derived
  tables are removed before each run, so every run folds the whole ledger;
- DuckDB's bare fold of the same files: the de-duplication, XOR fold and classification
  in one SQL query and no state kept (`baselines.py`), what a DuckDB user would write;
- `ackfold reconcile` on the Spark engine (`ACKFOLD_ENGINE__KIND=spark`, JVM start
  included), at the sizes of `--spark-sizes`, once on each master of `--spark-masters`
  (`ACKFOLD_SPARK__MASTER`; none given: the settings' own). Each Spark figure also has its
  cores (`local[N]`, `local[*]`: this machine's, `spark://...@N`: the N cores a cluster's
  workers give the run, as `make cluster` says) and its events per second per core, beside
  the embedded engine's (DuckDB uses every core of the machine).

The runs of each size alternate (ackfold, DuckDB, ackfold, ...), and the medians and the
ratio of the medians are printed. All must find the same roots by status, as the ledger
was written, or the benchmark stops. Then the cost of `--increment` new events, three
days later (outside `reconcile.lookback`), over each history of `--histories` events.
The ledgers are written by `arrow_ledger.py`, without a JVM. Prints a line per
measurement and a JSON summary, and draws the plot.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkout  # noqa: F401  (before settings load: the checkout's var/)
from arrow_ledger import ArrowLedger
from plot import plot_reconcile

from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import ACK_EVENTS

BENCH = Path(__file__).resolve().parent
ACKFOLD = str(Path(sys.executable).parent / "ackfold")
DEFAULT_PLOT = Path("var", "bench", "bench-reconcile.png")  # under var/: never a tracked file
DERIVED = ("root_state", "unmatched_events", "_checkpoints", "_ledger_lease")


def run(argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB, of the process and the children it waited for) and
    stdout of one command in a fresh process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here: its own resource usage
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err.read().decode()[-3000:]}")
        return seconds, int(usage.ru_maxrss), out.read().decode()


def ledger(var: Path, synthetic: ArrowLedger) -> int:
    shutil.rmtree(var, ignore_errors=True)
    writer = LedgerWriter(var / "warehouse")
    writer.create()
    return synthetic.write(writer)


def reset(var: Path) -> None:
    for name in DERIVED:
        shutil.rmtree(var / "warehouse" / name, ignore_errors=True)
    shutil.rmtree(var / "airflow", ignore_errors=True)


def env_for(var: Path, **extra: str) -> dict[str, str]:
    """A ledger's own settings, with the project's jar cache wherever the ledger lives."""
    jars = str(load_settings().jars_dir)
    return {**os.environ, "ACKFOLD_VAR_DIR": str(var), "ACKFOLD_JARS_DIR": jars, **extra}


def reconcile(var: Path, now: str, **extra: str) -> tuple[float, int, dict[str, Any]]:
    seconds, peak, out = run([ACKFOLD, "reconcile", "--now", now], env_for(var, **extra))
    return seconds, peak, json.loads(out)


def duckdb(var: Path, deadline: str) -> tuple[float, int, dict[str, int]]:
    out_file = var / "duckdb.parquet"
    table = str(var / "warehouse" / ACK_EVENTS)
    argv = [sys.executable, str(BENCH / "baselines.py"), table, deadline, str(out_file)]
    seconds, peak, out = run(argv, env_for(var))
    return seconds, peak, json.loads(out.strip().splitlines()[-1])


def line(label: str, events: int, seconds: float, peak: int) -> dict[str, float]:
    rate = events / seconds
    print(f"  {label:<36} {seconds:7.2f} s {rate:>13,.0f} events/s  peak {peak / 1024:6.0f} MB",
          flush=True)  # fmt: skip
    peak_mb = round(peak / 1024)
    return {"seconds": round(seconds, 2), "events_per_s": round(rate), "peak_mb": peak_mb}


def master_cores(master: str) -> tuple[str, int | None]:
    """A `--spark-masters` entry as (the master, its cores: None when it does not say).

    Example:
        >>> master_cores("local[1]"), master_cores("spark://127.0.0.1:7077@4")
        (('local[1]', 1), ('spark://127.0.0.1:7077', 4))
    """
    master, _, cores = master.partition("@")
    if cores:
        return master, int(cores)
    if master.startswith("local[") and master[6:-1].isdigit():
        return master, int(master[6:-1])
    if master in ("local", "local[*]"):
        return master, 1 if master == "local" else os.cpu_count()
    return master, None


def per_core(row: dict[str, Any], events: int, cores: int | None) -> dict[str, Any]:
    """`row` (a `line`) with its cores and its events per second per core."""
    rate = None if not cores else round(events / (row["seconds"] * cores))
    return {**row, "cores": cores, "events_per_s_per_core": rate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000000,50000000", help="events per ledger")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command per size")
    parser.add_argument("--spark-sizes", default="10000000", help="sizes also run on Spark")
    parser.add_argument("--spark-masters", default="", help="Spark masters to run them on, "
                        "comma-separated (local[1],local[2],spark://HOST:PORT@CORES); "
                        "none: the settings' master")  # fmt: skip
    parser.add_argument("--increment", type=int, default=1_000_000, help="new events")
    parser.add_argument("--histories", default="0,10000000,50000000", help="events before them")
    parser.add_argument("--workdir", default=None, help="where ledgers go (default: a temp dir)")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT, help="the PNG to draw")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ackfold-bench-"))
    spark_sizes = {int(s) for s in args.spark_sizes.split(",") if s}
    default = (None, master_cores(load_settings().spark.master)[1])
    masters = [master_cores(m) for m in args.spark_masters.split(",") if m] or [default]
    results: dict[str, Any] = {
        "sizes": {}, "increment": {}, "runs": args.runs, "increment_events": args.increment
    }  # fmt: skip

    for size in sorted(int(s) for s in args.sizes.split(",")):
        synthetic = ArrowLedger(roots=max(size // 8, 1))
        var = work / f"ledger-{size}"
        events = ledger(var, synthetic)
        expected = synthetic.expected()
        print(f"{events:,} events, {synthetic.roots:,} roots:", flush=True)
        now = synthetic.end + timedelta(hours=1)
        deadline = (now - timedelta(minutes=5)).isoformat()  # the default timeout
        timings: dict[str, list[tuple[float, int]]] = {"ackfold": [], "duckdb": []}
        for _ in range(args.runs):
            reset(var)
            seconds, peak, summary = reconcile(var, now.isoformat())
            _agree("ackfold (embedded)", summary["by_status"], expected)
            timings["ackfold"].append((seconds, peak))
            seconds, peak, statuses = duckdb(var, deadline)
            _agree("DuckDB", statuses, expected)
            timings["duckdb"].append((seconds, peak))
        row: dict[str, Any] = {"events": events, "roots": synthetic.roots, "by_status": expected}
        named = (("ackfold", "ackfold reconcile (embedded)"), ("duckdb", "DuckDB bare fold"))
        for name, label in named:
            seconds = statistics.median(s for s, _ in timings[name])
            row[name] = line(label, events, seconds, max(p for _, p in timings[name]))
        cores = os.cpu_count()
        row["ackfold"] = per_core(row["ackfold"], events, cores)
        for master, master_cores_ in masters if size in spark_sizes else []:
            reset(var)
            extra = {"ACKFOLD_ENGINE__KIND": "spark"}
            if master is not None:
                extra["ACKFOLD_SPARK__MASTER"] = master
            seconds, peak, summary = reconcile(var, now.isoformat(), **extra)
            _agree(f"ackfold (Spark, {master or 'default'})", summary["by_status"], expected)
            label = f"ackfold reconcile (Spark {master or ''}, JVM start)".replace(" ,", ",")
            found = per_core(line(label, events, seconds, peak), events, master_cores_)
            row.setdefault("spark", found)  # the first master's: what the plot draws
            row.setdefault("spark_by_master", {})[master or "default"] = found
        if "spark" in row and row["spark"]["events_per_s_per_core"]:
            embedded = row["ackfold"]["events_per_s_per_core"]
            for master, found in row["spark_by_master"].items():
                if found["events_per_s_per_core"]:
                    ratio = round(embedded / found["events_per_s_per_core"], 2)
                    found["embedded_per_core_ratio"] = ratio
                    print(f"  Spark {master}: {ratio}x the embedded engine's time per core",
                          flush=True)  # fmt: skip
        row["ratio_to_duckdb"] = round(row["ackfold"]["seconds"] / row["duckdb"]["seconds"], 2)
        print(f"  ackfold / DuckDB: {row['ratio_to_duckdb']}x (medians of {args.runs})", flush=True)
        results["sizes"][size] = row
        shutil.rmtree(var, ignore_errors=True)

    for history in sorted(int(h) for h in args.histories.split(",") if h):
        var = work / f"history-{history}"
        old = ArrowLedger(roots=history // 8) if history else None
        ledger(var, old or ArrowLedger(roots=0))
        if old:
            reconcile(var, (old.end + timedelta(hours=1)).isoformat())  # the history, folded
        start = (old.start if old else ArrowLedger(roots=0).start) + timedelta(days=3)
        new = ArrowLedger(roots=args.increment // 8, first_root=old.roots if old else 0,
                          start=start, seed=11)  # fmt: skip
        new.write(LedgerWriter(var / "warehouse"))
        seconds, peak, summary = reconcile(var, (new.end + timedelta(hours=1)).isoformat())
        print(f"{summary['events_read']:,} new events over {history:,}:", flush=True)
        results["increment"][history] = line(
            "ackfold reconcile (embedded)", summary["events_read"], seconds, peak
        )
        shutil.rmtree(var, ignore_errors=True)

    print(json.dumps(results, indent=2, default=str))
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot_reconcile(results, args.plot)
        print(f"plot: {args.plot}")


def _agree(name: str, found: dict[str, int], expected: dict[str, int]) -> None:
    if {k: v for k, v in found.items() if v} != {k: v for k, v in expected.items() if v}:
        sys.exit(f"{name} found {found}, the ledger holds {expected}")


if __name__ == "__main__":
    main()
