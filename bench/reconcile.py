"""Reconcile benchmark: events/s end to end, the incremental cost over history, state size.

    .venv/bin/python bench/reconcile.py [--sizes 1000000,10000000] [--history 10000000]

Prints one line of figures per measurement and a JSON summary at the end. Every ledger
is synthetic (`ackfold.synth`), written through the real tables; every reconcile is the
real one (streaming read, fold, MERGE, sweep), timed warm: one small run first warms the
JVM. Record the output in docs/benchmarks.md with the command.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from ackfold.config import load_settings
from ackfold.reconcile import reconcile
from ackfold.spark import get_spark
from ackfold.synth import Synthetic
from ackfold.tables import ROOT_STATE, Ledger

FANOUT, DEPTH = 2, 2  # 8 events per root


def roots_for(events: int) -> int:
    return events // Synthetic(roots=1, fanout=FANOUT, depth=DEPTH).events_per_root


def timed_reconcile(spark, settings, synthetic: Synthetic) -> tuple[float, dict]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    summary = reconcile(spark, settings, now=synthetic.end + timedelta(hours=1))
    return time.perf_counter() - start, summary


def state_bytes_per_root(path: Path, roots: int) -> float:
    size = sum(p.stat().st_size for p in path.rglob("*.parquet"))
    return size / max(roots, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="1000000,10000000", help="new-event counts, comma-separated"
    )
    parser.add_argument("--history", type=int, default=10_000_000, help="events already reconciled")
    parser.add_argument("--increment", type=int, default=1_000_000, help="new events over history")
    parser.add_argument("--workdir", default=None, help="where ledgers go (default: a temp dir)")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ackfold-bench-"))
    results: dict[str, object] = {}
    jars = load_settings().jars_dir  # the project's jar cache, wherever the ledgers go

    def fresh_settings(name: str):  # type: ignore[no-untyped-def]
        shutil.rmtree(work / name, ignore_errors=True)
        return load_settings(var_dir=work / name, jars_dir=jars)

    warm = fresh_settings("warmup")
    spark = get_spark(warm, app_name="ackfold-bench")
    warm_synth = Synthetic(roots=20_000, fanout=FANOUT, depth=DEPTH)
    warm_synth.write(spark, Ledger(warm.table_root))
    timed_reconcile(spark, warm, warm_synth)

    for events in (int(s) for s in args.sizes.split(",")):
        settings = fresh_settings(f"size-{events}")
        synth = Synthetic(roots=roots_for(events), fanout=FANOUT, depth=DEPTH)
        synth.write(spark, Ledger(settings.table_root))
        seconds, summary = timed_reconcile(spark, settings, synth)
        rate = summary["events_read"] / seconds
        per_root = state_bytes_per_root(Path(settings.table_root) / ROOT_STATE, synth.roots)
        print(
            f"reconcile {summary['events_read']:>11,} new events over an empty ledger: "
            f"{seconds:7.1f} s  {rate:>10,.0f} events/s  root_state {per_root:.0f} B/root",
            flush=True,
        )
        results[f"new_{events}"] = {
            "seconds": seconds,
            "events_per_s": rate,
            "bytes_per_root": per_root,
        }
        shutil.rmtree(work / f"size-{events}", ignore_errors=True)

    for history in (0, args.history):
        settings = fresh_settings(f"history-{history}")
        ledger = Ledger(settings.table_root)
        if history:
            old = Synthetic(roots=roots_for(history), fanout=FANOUT, depth=DEPTH)
            old.write(spark, ledger)
            timed_reconcile(spark, settings, old)
        new = Synthetic(
            roots=roots_for(args.increment), fanout=FANOUT, depth=DEPTH,
            first_root=roots_for(history), start=Synthetic(roots=1).start + timedelta(days=3),
        )  # fmt: skip
        new.write(spark, ledger)
        seconds, summary = timed_reconcile(spark, settings, new)
        rate = summary["events_read"] / seconds
        print(
            f"reconcile {summary['events_read']:>11,} new events over {history:>11,} reconciled: "
            f"{seconds:7.1f} s  {rate:>10,.0f} events/s",
            flush=True,
        )
        results[f"increment_over_{history}"] = {"seconds": seconds}
        shutil.rmtree(work / f"history-{history}", ignore_errors=True)

    print(json.dumps(results, indent=2))
    spark.stop()


if __name__ == "__main__":
    main()
