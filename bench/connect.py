"""`ackfold reconcile` through Spark Connect against a classic local session.

Two identical synthetic ledgers, one per mode, written by delta-rs (`arrow_ledger`): no
JVM in this process, so neither mode may lean on one. Each is reconciled by the whole CLI command
in a new process, as a user (or a DAG task) runs it, three times:
- first with every event new (the reconcile of `--events` events);
- then with nothing new, the fixed cost that a scheduled reconcile pays every run: it is
  answered without Spark (`ackfold.reconcile.quiet`);
- then with nothing new again, its mark removed: the Spark run that a run with a timeout
  due still makes.

Classic: each command starts its own JVM (`local[2]`). Connect: each command is a client
of one warm local Spark Connect server (`ackfold connect`'s), started here unless
`--remote` names one. Both modes must classify the roots alike.

    .venv/bin/python bench/connect.py --events 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkout  # noqa: F401  (before settings load: the checkout's var/)
from arrow_ledger import ArrowLedger
from common import DEPTH, FANOUT, Workdir, roots_for
from deltalake import DeltaTable

from ackfold.config import Settings
from ackfold.ledger.commits.marks import read_mark
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import ACK_EVENTS, Ledger
from ackfold_dev.connect import LocalConnectServer
from ackfold_dev.ports import free_port


def timed_reconcile(
    settings: Settings, now: str, remote: str | None
) -> tuple[float, dict[str, Any]]:
    """The wall time of `ackfold reconcile --now NOW` on `settings`' ledger, JVM start (or
    the Connect handshake) included; and the summary it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACKFOLD_")}
    env.update(ACKFOLD_VAR_DIR=str(settings.var_dir), ACKFOLD_JARS_DIR=str(settings.jars_dir))
    # Spark both ways, classic and Connect: the embedded engine is bench/reconcile.py's.
    env["ACKFOLD_ENGINE__KIND"] = "spark"
    if remote:
        env["ACKFOLD_SPARK__REMOTE"] = remote
    command = [str(Path(sys.executable).parent / "ackfold"), "reconcile", "--now", now]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout[done.stdout.index("{") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events per ledger")
    parser.add_argument("--remote", default=None, help="an sc:// server (default: start one)")
    parser.add_argument("--workdir", default=None, help="where ledgers go (default: a temp dir)")
    parser.add_argument(
        "--repeats", choices=["both", "connect"], default="both",
        help="the modes that run the two repeats after the first run (connect: the suite's "
        "tiny run; the classic repeats are tests/spark/test_cli_on_spark_ledger.py's)",
    )  # fmt: skip
    args = parser.parse_args()

    work = Workdir(args.workdir, "ackfold-bench-connect-")
    synthetic = ArrowLedger(roots=roots_for(args.events), fanout=FANOUT, depth=DEPTH)
    ledgers = {mode: work.settings(mode) for mode in ("classic", "connect")}
    print(f"writing 2 ledgers of {synthetic.events:,} events ({synthetic.roots:,} roots) ...")
    for settings in ledgers.values():
        synthetic.write(LedgerWriter(settings.table_root))
    now = (synthetic.end + timedelta(hours=1)).isoformat()  # as bench/reconcile.py's

    results: dict[str, Any] = {"events": synthetic.events, "roots": synthetic.roots}
    with ExitStack() as stack:
        remote = args.remote
        if remote is None:
            server = stack.enter_context(
                LocalConnectServer(work.settings("server"), port=free_port())
            )
            remote = server.url
            print(f"Spark Connect server up at {remote}")
        by_status: dict[str, Any] = {}
        for mode, settings in ledgers.items():
            url = remote if mode == "connect" else None
            first, summary = timed_reconcile(settings, now, url)
            events = DeltaTable(Ledger(settings.table_root).path(ACK_EVENTS))
            folded = read_mark(Ledger(settings.table_root), None, str(events.metadata().id))
            assert folded == events.version(), f"{mode}: the first run left no mark for the next"
            by_status[mode] = summary["by_status"]
            results[mode] = {"all new": round(first, 2)}
            if args.repeats != "both" and mode != args.repeats:
                print(f"{mode:8} all {synthetic.events:,} new: {first:6.1f} s")
                continue
            again, repeat = timed_reconcile(settings, now, url)
            # A commit of no row: the Spark run that a new commit (or a timeout due) needs.
            events.create_write_transaction([], mode="append", schema=events.schema())
            spark_run, spark_repeat = timed_reconcile(settings, now, url)
            for run in (repeat, spark_repeat):
                assert run["events_read"] == 0, f"{mode}: a later run found new events"
                assert run["by_status"] == summary["by_status"], f"{mode}: {run} != {summary}"
            results[mode] |= {
                "nothing new": round(again, 2),
                "nothing new, Spark run": round(spark_run, 2),
            }
            print(
                f"{mode:8} all {synthetic.events:,} new: {first:6.1f} s   nothing new: "
                f"{again:5.1f} s   nothing new, Spark run: {spark_run:5.1f} s"
            )
    if by_status["classic"] != by_status["connect"]:
        raise SystemExit(f"the modes disagree: {by_status}")
    results["by_status"] = by_status["classic"]
    results["connect / classic, all new"] = round(
        results["connect"]["all new"] / results["classic"]["all new"], 2
    )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
