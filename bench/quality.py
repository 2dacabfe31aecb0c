"""Quality-check benchmark: `ackfold quality` on the embedded engine and on Spark, side by
side on the same ledger, each the whole command in a fresh process: on a window of 10M
events, and on a 1M-event window over that ledger as history.

    .venv/bin/python bench/quality.py [--events 10000000] [--increment 1000000]

The ledger is synthetic (`bench/arrow_ledger.py`, 8 events per root, written by delta-rs
with no JVM) and reconciled by the real `ackfold reconcile`. Each quality run is the real
command (every suite, Data Docs, `quality_results`), an hour after the window's last
root: no replay runs, so its failed and timed-out roots count as lost and
`no_lost_roots` fails, as it would in production (the command exits 1). The script stops
if the two engines disagree on any check's verdict or observed value, or if the embedded
run's whole process peaks above `engine.memory_limit`. Record the output in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkout  # noqa: F401  (before settings load: the checkout's var/)
from arrow_ledger import ArrowLedger

from ackfold.config import load_settings
from ackfold.embedded.duck import byte_count
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.reading.reader import LedgerReader

ENGINES = ("embedded", "spark")
# The project's caches (`make setup`), whatever var dir a ledger is in: a run in a var dir
# of its own would look for the jars and Data Docs' assets there.
_PROJECT = load_settings()
# The embedded run's whole process stays inside it (`ackfold.embedded.duck.connect`).
LIMIT = byte_count(_PROJECT.engine.memory_limit)
PROJECT_CACHES = {
    "ACKFOLD_JARS_DIR": str(_PROJECT.jars_dir),
    "ACKFOLD_QUALITY__ASSETS_DIR": str(_PROJECT.quality.assets_dir),
}
SUITE_LINE = re.compile(r"^quality: [\w.]+: \d+ checks")


def ackfold(args: list[str], var: Path, engine: str | None) -> tuple[float, int, str]:
    """Run `ackfold ARGS` in a fresh process on the ledger under `var`: its wall time in
    seconds, its peak RSS in MiB (GNU time, when there), and what it said on stderr."""
    # The ledger in `var`; the jars and Data Docs' assets where `make setup` put them.
    env = dict(os.environ, ACKFOLD_VAR_DIR=str(var), **PROJECT_CACHES)
    if engine is not None:
        env["ACKFOLD_ENGINE__KIND"] = engine
    command = [str(Path(sys.executable).with_name("ackfold")), *args]
    rss_file = var / "rss.txt"
    gnu_time = shutil.which("time") or "/usr/bin/time"
    measured = Path(gnu_time).is_file()
    if measured:
        command = [gnu_time, "-f", "%M", "-o", str(rss_file), *command]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: a check failed, as expected here
        raise SystemExit(f"ackfold {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    rss = int(rss_file.read_text().split()[-1]) // 1024 if measured else 0
    return seconds, rss, done.stderr


def reconcile(var: Path, now: datetime, engine: str | None) -> None:
    ackfold(["reconcile", "--now", now.isoformat()], var, engine)


def checks(var: Path) -> dict[str, tuple[bool, str]]:
    """The latest quality run's verdicts and observed values, by suite and check."""
    rows = LedgerReader(load_settings(var_dir=var).table_root).quality_run()
    return {f"{r['suite']} {r['check_name']}": (r["success"], r["observed"]) for r in rows}


def compare(
    var: Path, now: datetime, engines: tuple[str, ...] = ENGINES
) -> dict[str, dict[str, float]]:
    """Each engine's whole `ackfold quality` on the ledger under `var` (both, by default),
    checked to agree."""
    found: dict[str, dict[str, float]] = {}
    verdicts = {}
    for engine in engines:
        seconds, rss, said = ackfold(["quality", "--now", now.isoformat()], var, engine)
        if engine == "embedded":  # what each suite took
            print("\n".join(t for t in said.splitlines() if SUITE_LINE.match(t)), flush=True)
        verdicts[engine] = checks(var)
        found[engine] = {"seconds": round(seconds, 2), "peak_rss_mb": rss}
        if engine == "embedded" and rss * 2**20 > LIMIT:
            raise SystemExit(
                f"the embedded quality run peaked at {rss:,} MiB, above engine.memory_limit "
                f"({_PROJECT.engine.memory_limit})"
            )
    if len(verdicts) == 2 and verdicts["embedded"] != verdicts["spark"]:
        differ = {
            k: (verdicts["embedded"].get(k), verdicts["spark"].get(k))
            for k in set(verdicts["embedded"]) | set(verdicts["spark"])
            if verdicts["embedded"].get(k) != verdicts["spark"].get(k)
        }
        raise SystemExit(f"the engines disagree: {json.dumps(differ, indent=2)}")
    found["checks"] = {"count": len(verdicts["embedded"])}
    return found


def line(label: str, events: int, run: dict[str, dict[str, float]]) -> str:
    e = run["embedded"]
    said = f"quality over {events:>11,} events {label}: embedded {e['seconds']:6.1f} s "
    said += f"({e['peak_rss_mb']:,} MB)"
    if "spark" in run:
        s = run["spark"]
        said += f", Spark {s['seconds']:6.1f} s ({s['peak_rss_mb']:,} MB), "
        said += f"{s['seconds'] / e['seconds']:.1f}x"
    return said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000, help="events in the window")
    parser.add_argument("--increment", type=int, default=1_000_000, help="a later window's events")
    parser.add_argument(
        "--workdir", default=None, help="where the ledger goes (default: a temp dir)"
    )
    parser.add_argument(
        "--reconcile-engine", choices=["auto", *ENGINES], default=None,
        help="the engine that reconciles the ledger (default: engine.kind's)",
    )  # fmt: skip
    parser.add_argument(
        "--increment-engines", choices=["both", "embedded"], default="both",
        help="the engines of the later window (embedded: the suite's tiny run, whose Spark "
        "run of the first window shows the Spark path; tests/spark shows they agree)",
    )  # fmt: skip
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ackfold-bench-quality-"))
    var = work / "quality"
    shutil.rmtree(var, ignore_errors=True)
    results: dict[str, object] = {}

    big = ArrowLedger(roots=max(1, args.events // ArrowLedger(roots=1).events_per_root))
    events = big.write(LedgerWriter(load_settings(var_dir=var).table_root))
    now = big.end + timedelta(hours=1)
    reconcile(var, now, args.reconcile_engine)
    run = compare(var, now)
    print(line("in the window", events, run), flush=True)
    results["window_all"] = {"events": events, "roots": big.roots, **run}

    # Five days on (past the 2-day window and its day of margin), later events: only they
    # are read.
    later = ArrowLedger(
        roots=max(1, args.increment // big.events_per_root), first_root=big.roots,
        start=big.start + timedelta(days=5), seed=big.seed + 1,  # other root ids
    )  # fmt: skip
    added = later.write(LedgerWriter(load_settings(var_dir=var).table_root))
    now = later.end + timedelta(hours=1)
    reconcile(var, now, args.reconcile_engine)
    run = compare(var, now, ENGINES if args.increment_engines == "both" else ("embedded",))
    print(line(f"in the window, {events:,} before it", added, run), flush=True)
    results["window_increment"] = {"events": added, "history": events, **run}
    print(json.dumps(results, indent=2))
    shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
