"""Quality-check benchmark: the cost of `ackfold quality` on a 10M-event ledger, and on a
1M-event window over that ledger as history.

    .venv/bin/python bench/quality.py [--events 10000000] [--increment 1000000]

The ledger is synthetic (`ackfold.ledger.synth`, 8 events per root), written through the real
tables and reconciled by the real reconciler; each quality run is the real one (every
suite, Data Docs, `quality_results`), timed warm: a small run first warms the JVM and GX.
Each window is checked an hour after its last root, right after its reconcile. No replay
runs, and a root's backoff counts from when it was due, so its failed and timed-out roots
count as lost: `no_lost_roots` fails, as it would in production. Record the output in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEPTH, FANOUT, WARM_UP_ROOTS, Workdir, reconcile_after, roots_for

from ackfold.ledger.synth import Synthetic
from ackfold.ledger.tables import Ledger
from ackfold.quality import run_quality
from ackfold.spark import get_spark


def add(spark, settings, synthetic: Synthetic) -> None:  # type: ignore[no-untyped-def]
    synthetic.write(spark, Ledger(settings.table_root))
    reconcile_after(spark, settings, synthetic)


def timed_quality(spark, settings, synthetic: Synthetic) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    report = run_quality(settings, spark=spark, now=synthetic.end + timedelta(hours=1), say=print)
    return time.perf_counter() - start, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000, help="events in the window")
    parser.add_argument("--increment", type=int, default=1_000_000, help="a later window's events")
    parser.add_argument("--workdir", default=None, help="where ledgers go (default: a temp dir)")
    parser.add_argument(
        "--warm-up", type=int, default=WARM_UP_ROOTS, help="roots of the warm-up run (0: none)"
    )
    args = parser.parse_args()
    work = Workdir(args.workdir, "ackfold-bench-")
    results: dict[str, object] = {}

    warm = work.settings("warmup")
    spark = get_spark(warm, app_name="ackfold-bench-quality")
    if args.warm_up:
        warm_synth = Synthetic(roots=args.warm_up, fanout=FANOUT, depth=DEPTH)
        add(spark, warm, warm_synth)
        timed_quality(spark, warm, warm_synth)

    settings = work.settings("ledger")
    big = Synthetic(roots=roots_for(args.events), fanout=FANOUT, depth=DEPTH)
    add(spark, settings, big)
    seconds, report = timed_quality(spark, settings, big)
    checks = len(report.results)  # type: ignore[attr-defined]
    failed = len(report.violations)  # type: ignore[attr-defined]
    print(
        f"quality over {big.events:>11,} events ({big.roots:,} roots) in the window: "
        f"{seconds:6.1f} s  {big.events / seconds:>10,.0f} events/s  "
        f"({checks} checks, {failed} failed)",
        flush=True,
    )
    results["window_all"] = {"events": big.events, "seconds": seconds, "checks": checks}

    # Five days on (past the 2-day window and its day of margin), later events: only they
    # are read.
    later = Synthetic(
        roots=roots_for(args.increment), fanout=FANOUT, depth=DEPTH,
        first_root=big.roots, start=big.start + timedelta(days=5),
    )  # fmt: skip
    add(spark, settings, later)
    seconds, report = timed_quality(spark, settings, later)
    print(
        f"quality over {later.events:>11,} events in the window, {big.events:,} before it: "
        f"{seconds:6.1f} s  {later.events / seconds:>10,.0f} events/s",
        flush=True,
    )
    results["window_increment"] = {"events": later.events, "seconds": seconds}
    print(json.dumps(results, indent=2))
    spark.stop()
    shutil.rmtree(work.path, ignore_errors=True)


if __name__ == "__main__":
    main()
