"""Append throughput of the ledger on S3 against the local file system, side by side.

    .venv/bin/python bench/object_store.py [--appends 40] [--roots 1000] [--writers 1,2]

Starts the local S3 API (moto's server on a free loopback port, `ackfold.local.s3`) and
appends the same batches, through `LedgerWriter.append` (one commit to `roots`, one to
`ack_events` per batch, as a producer or a tracked app's driver makes), to a warehouse
on the local file system and to one on S3, with 1 and then N writers at once (threads:
delta-rs releases the GIL). Prints commits and rows per second, the median and 95th
percentile of one append, the commits that lost a race (412) and were retried, and a
JSON summary; checks that every row is there. Record the output in docs/benchmarks.md.

The S3 server is a Python process on this machine: its figures are a floor for the
protocol's cost (two requests more per commit than a local create), not S3's latency.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from common import per_second

from ackfold import LedgerWriter, Tracker
from ackfold.ledger.tables import ROOTS
from ackfold.local.s3 import LocalS3


def batches(writer: int, appends: int, roots: int) -> list[tuple[list[Any], list[Any]]]:
    """The rows of each append: `roots` roots and their init and ack events."""
    made = []
    for n in range(appends):
        tracker = Tracker(f"bench-{writer}")
        for i in range(roots):
            root = tracker.spout(f"{writer}-{n}-{i}", source="sqs", source_queue="bench")
            tracker.ack(root, stage="store")
        made.append((tracker.drain_roots(), tracker.drain()))
    return made


def run(warehouse: str, writers: int, appends: int, roots: int) -> dict[str, Any]:
    """`writers` threads, each appending its batches to `warehouse`; their figures."""
    # Warm-up: the first append of a process loads what every later one reuses.
    LedgerWriter(warehouse).append(*batches(-1, 1, 1)[0])
    work = [batches(w, appends, roots) for w in range(writers)]
    latencies: list[float] = []
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def append_all(mine: list[tuple[list[Any], list[Any]]]) -> None:
        writer = LedgerWriter(warehouse)
        barrier.wait()
        try:
            for root_rows, event_rows in mine:
                start = time.perf_counter()
                writer.append(root_rows, event_rows)
                latencies.append(time.perf_counter() - start)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=append_all, args=(w,)) for w in work]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    if errors:
        raise errors[0]
    expected = writers * appends * roots
    found = _count(warehouse, ROOTS) - 1  # the warm-up's root
    if found != expected:
        sys.exit(f"{warehouse}: {found} roots, expected {expected}: a commit was lost")
    latencies.sort()
    return {
        "seconds": round(seconds, 2),
        "appends_per_s": per_second(writers * appends / seconds),
        "commits_per_s": per_second(2 * writers * appends / seconds),
        "rows_per_s": per_second(3 * expected / seconds),
        "append_ms_p50": round(1000 * statistics.median(latencies), 1),
        "append_ms_p95": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 1),
    }


def _count(warehouse: str, table: str) -> int:
    from deltalake import DeltaTable

    from ackfold.ledger.store import delta_uri, storage_options

    uri = f"{warehouse}/{table}"
    dt = DeltaTable(delta_uri(uri), storage_options=storage_options(uri))
    return int(dt.to_pyarrow_table(columns=["root_id"]).num_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=40, help="appends per writer")
    parser.add_argument("--roots", type=int, default=1000, help="roots per append (x3 rows)")
    parser.add_argument("--writers", default="1,2", help="writers at once, comma-separated")
    parser.add_argument("--workdir", help="where the local warehouse and the S3 journal go")
    args = parser.parse_args()
    counts = [int(n) for n in args.writers.split(",")]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ackfold-bench-store-"))
    results: dict[str, Any] = {"appends": args.appends, "roots": args.roots}
    with LocalS3(work / "s3", bucket="bench") as s3:
        os.environ.update(s3.env())
        for writers in counts:
            for store, base in (("local", str(work / "local")), ("s3", "s3://bench")):
                warehouse = f"{base}/w{writers}"
                before = len(s3.log_file.read_text().splitlines())
                row = run(warehouse, writers, args.appends, args.roots)
                if store == "s3":
                    log = s3.log_file.read_text().splitlines()[before:]
                    mine = [line for line in log if f"/bench/w{writers}/" in line]
                    row["requests_per_append"] = round(len(mine) / (writers * args.appends), 1)
                    row["raced_412"] = sum(
                        '" 412 ' in line and "_delta_log" in line for line in mine
                    )
                results[f"{store}_{writers}"] = row
                print(f"{store:>5} x{writers}: " + ", ".join(f"{k} {v}" for k, v in row.items()))
    for writers in counts:
        local, s3_row = results[f"local_{writers}"], results[f"s3_{writers}"]
        ratio = s3_row["rows_per_s"] / local["rows_per_s"]
        results[f"s3_to_local_{writers}"] = round(ratio, 2)
        print(f"S3 / local, {writers} writer(s): {ratio:.2f} of the rows per second")
    print(json.dumps(results, indent=2))
    sys.stdout.flush()
    os._exit(0)  # delta-rs may abort at interpreter exit (delta-rs#2184)


if __name__ == "__main__":
    main()
