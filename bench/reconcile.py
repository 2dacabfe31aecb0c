"""Reconcile benchmark: ackfold against single-node baselines, and its incremental cost.

    .venv/bin/python bench/reconcile.py [--sizes 1000000,10000000,50000000]
        [--increment 1000000] [--fanout 2] [--depth 2] [--fail-rate 0.01]
        [--missing-rate 0.01] [--late-rate 0.001] [--plot var/bench/bench-reconcile.png]

For each size, one synthetic ledger (`ackfold.ledger.synth`, written by Spark through the real
tables) is folded, in this order, by:
- DuckDB, over the table's current files as delta-rs lists them (`baselines.duckdb_fold`);
- Spark SQL, the same query over the same files (`baselines.spark_sql_fold`);
- Storm's acker in Python, an in-memory map fed event by event (`baselines.StormAcker`);
- ackfold's reconcile, end to end: the Delta streaming read, de-duplication, XOR fold,
  classification, MERGE into `root_state`, the timeout sweep and the summary.
All four must find the same roots by status, or the benchmark stops. Then `--increment`
new events, three days later (outside `reconcile.lookback`), are reconciled over that
ledger: the incremental cost, also measured over an empty ledger. Spark is warm (one
small run first). Prints a line per measurement, a JSON summary, and draws the plot into
var/bench/ (ignored by git: a run leaves the checkout clean). Record the output in
docs/benchmarks.md with the command, and to update the page's picture, pass
`--plot docs/images/bench-reconcile.png`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import StormAcker, duckdb_fold, spark_sql_fold, table_files
from common import WARM_UP_ROOTS, Workdir, reconcile_after, roots_for, warm_up
from plot import plot_reconcile

from ackfold.ledger.synth import Synthetic
from ackfold.ledger.tables import ACK_EVENTS, ROOT_STATE, Ledger
from ackfold.spark import get_spark

T = TypeVar("T")
# Under var/, not docs/images/: a benchmark run must not rewrite a tracked file.
DEFAULT_PLOT = Path(__file__).resolve().parents[1] / "var" / "bench" / "bench-reconcile.png"


def timed(run: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def bytes_per_row(table: Path, rows: int) -> float:
    return sum(p.stat().st_size for p in table.rglob("*.parquet")) / max(rows, 1)


def report(label: str, events: int, seconds: float, extra: str = "") -> dict[str, float]:
    rate = events / seconds
    print(f"  {label:<34} {seconds:8.1f} s  {rate:>12,.0f} events/s  {extra}".rstrip(), flush=True)
    return {"seconds": round(seconds, 2), "events_per_s": round(rate)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000,50000000", help="events per ledger")
    parser.add_argument("--increment", type=int, default=1_000_000, help="new events over each")
    parser.add_argument("--fanout", type=int, default=2, help="children per tuple")
    parser.add_argument("--depth", type=int, default=2, help="levels below the spout tuple")
    parser.add_argument("--fail-rate", type=float, default=0.01, help="roots failed at a leaf")
    parser.add_argument("--missing-rate", type=float, default=0.01, help="roots missing an ack")
    parser.add_argument("--late-rate", type=float, default=0.001, help="events appended late")
    parser.add_argument("--no-acker", action="store_true", help="skip the Python acker")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT, help="the PNG to draw")
    parser.add_argument("--workdir", default=None, help="where ledgers go (default: a temp dir)")
    parser.add_argument(
        "--warm-up", type=int, default=WARM_UP_ROOTS, help="roots of the warm-up run (0: none)"
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    work = Workdir(args.workdir, "ackfold-bench-")

    def synthetic(events: int, **shape: Any) -> Synthetic:
        return Synthetic(
            roots=roots_for(events, args.fanout, args.depth), fanout=args.fanout,
            depth=args.depth, fail_rate=args.fail_rate, missing_rate=args.missing_rate,
            late_rate=args.late_rate, **shape,
        )  # fmt: skip

    spark = get_spark(work.settings("spark"), app_name="ackfold-bench")
    warm_up(spark, work, args.warm_up)
    results: dict[str, Any] = {"sizes": {}, "increment": {}, "shape": vars(args) | {"plot": None}}

    def increment_over(settings: Any, history: Synthetic | None) -> None:
        start = (history.start if history else Synthetic(roots=1).start) + timedelta(days=3)
        first = history.first_root + history.roots if history else 0
        new = synthetic(args.increment, first_root=first, start=start)
        new.write(spark, Ledger(settings.table_root))
        seconds, summary = timed(lambda: reconcile_after(spark, settings, new))
        over = history.events if history else 0
        print(f"{summary['events_read']:,} new events over {over:,} reconciled:", flush=True)
        results["increment"][over] = report("ackfold reconcile", summary["events_read"], seconds)

    empty = work.settings("history-0")
    Ledger(empty.table_root).create(spark)  # as the other ledgers have theirs: not timed
    increment_over(empty, None)
    work.remove("history-0")

    def one_size(size: int) -> None:
        settings = work.settings(f"ledger-{size}")
        ledger = Ledger(settings.table_root)
        synth = synthetic(size)
        print(f"{synth.events:,} events, {synth.roots:,} roots:", flush=True)
        seconds, _ = timed(lambda: synth.write(spark, ledger))
        row: dict[str, Any] = {"events": synth.events, "roots": synth.roots}
        size_per_event = bytes_per_row(Path(ledger.path(ACK_EVENTS)), synth.events)
        row["generate"] = report(
            "generate (Spark -> Delta)", synth.events, seconds,
            f"ack_events {size_per_event:.0f} B/event",
        )  # fmt: skip
        row["ack_events_bytes_per_event"] = round(size_per_event, 1)

        now = synth.end + timedelta(hours=1)
        deadline = now - settings.app(synth.app).timeout
        files = table_files(ledger.path(ACK_EVENTS))
        out = work.path / f"ledger-{size}"
        runs: list[tuple[str, Callable[[], dict[str, int]]]] = [
            ("duckdb", lambda: duckdb_fold(files, deadline, out / "duckdb.parquet")),
            ("spark_sql", lambda: spark_sql_fold(spark, files, deadline, out / "spark-sql")),
        ]
        if not args.no_acker:
            acker = StormAcker()
            deadline_us = int(deadline.timestamp() * 1_000_000)
            runs.append(
                ("storm_acker", lambda: (acker.fold_files(files), acker.statuses(deadline_us))[1])
            )
        statuses: dict[str, dict[str, int]] = {}
        for name, run in runs:
            seconds, statuses[name] = timed(run)
            row[name] = report(name.replace("_", " "), synth.events, seconds)
        if not args.no_acker:
            acker.pending.clear()  # its map holds gigabytes at 50M events
        seconds, summary = timed(lambda: reconcile_after(spark, settings, synth))
        statuses["ackfold"] = summary["by_status"]
        state = bytes_per_row(Path(settings.table_root) / ROOT_STATE, synth.roots)
        row["ackfold"] = report(
            "ackfold reconcile (end to end)", summary["events_read"], seconds,
            f"root_state {state:.0f} B/root",
        )  # fmt: skip
        row["ratio_to_duckdb"] = {
            name: round(row[name]["seconds"] / row["duckdb"]["seconds"], 1) for name in statuses
        }
        print(f"  time / DuckDB's: {row['ratio_to_duckdb']}", flush=True)
        if len({json.dumps(s, sort_keys=True) for s in statuses.values()}) != 1:
            sys.exit(f"the engines disagree on the roots by status: {statuses}")
        row["by_status"] = statuses["ackfold"]
        results["sizes"][size] = row
        if size >= args.increment:
            increment_over(settings, synth)
        work.remove(f"ledger-{size}")

    for size in sizes:
        one_size(size)

    spark.stop()
    print(json.dumps(results, indent=2, default=str))
    if args.plot:
        plot_reconcile(results, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
