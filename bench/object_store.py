"""The ledger on each object store against the local file system, side by side: append
throughput (tracking's write path) and the embedded reconcile's speed.

    .venv/bin/python bench/object_store.py [--stores s3,gcs,azure] [--appends 40]
        [--roots 1000] [--writers 1,2] [--reconcile-roots 20000]

Starts the local stores (moto's S3 API, fake-gcs-server and Azurite behind ackfold's
proxy: `ackfold_dev`, each on a free loopback port) and, on each and on the local disk:

- appends the same batches through `LedgerWriter.append` (one commit to `roots`, one to
  `ack_events` per batch: what a producer or a tracked app's driver makes), with 1 and
  then N writers at once (threads: delta-rs releases the GIL). Prints commits and rows
  per second, the median and 95th percentile of one append, and the commits that lost a
  race (refused by the store, retried); checks that every row is there;
- writes a synthetic ledger of `--reconcile-roots` roots and times the embedded reconcile
  over all of it, then over 1% new roots (`ackfold.runs.run_reconcile`, in process).

Ends with a JSON summary and each store's ratios to the local disk. Record the output in
docs/benchmarks.md. The stores are processes on this machine: their figures are a floor
for each protocol's cost in requests, not a cloud's latency.
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
from urllib.parse import unquote

from common import per_second

from ackfold import LedgerWriter, Tracker
from ackfold.config import load_settings
from ackfold.ledger.schema.tables import ROOTS
from ackfold.runs.reconcile import run_reconcile
from ackfold_dev.azurite import LocalAzure
from ackfold_dev.gcs import LocalGCS
from ackfold_dev.s3 import LocalS3

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkout  # noqa: F401  (before settings load: the checkout's var/)
from arrow_ledger import ArrowLedger


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

    from ackfold.ledger.storage.store import delta_uri, storage_options

    uri = f"{warehouse}/{table}"
    dt = DeltaTable(delta_uri(uri), storage_options=storage_options(uri))
    return int(dt.to_pyarrow_table(columns=["root_id"]).num_rows)


def reconcile_speed(warehouse: str, roots: int, work: Path) -> dict[str, Any]:
    """The embedded reconcile over a synthetic ledger of `roots` roots, then over 1% new."""
    from datetime import timedelta

    settings = load_settings(var_dir=work, warehouse=warehouse)
    writer = LedgerWriter(warehouse)
    ledger = ArrowLedger(roots=roots)
    ledger.write(writer)
    start = time.perf_counter()
    first = run_reconcile(settings, now=ledger.end + timedelta(hours=1), engine="embedded")
    all_s = time.perf_counter() - start
    later = ArrowLedger(roots=max(1, roots // 100), first_root=roots, start=ledger.end)
    later.write(writer)
    start = time.perf_counter()
    second = run_reconcile(settings, now=later.end + timedelta(hours=1), engine="embedded")
    new_s = time.perf_counter() - start
    return {
        "events": first["events_read"],
        "reconcile_s": round(all_s, 2),
        "events_per_s": per_second(first["events_read"] / all_s),
        "new_events": second["events_read"],
        "reconcile_new_s": round(new_s, 2),
    }


def _server(store: str, work: Path) -> Any:
    if store == "s3":
        return LocalS3(work / "s3", bucket="bench")
    if store == "gcs":
        return LocalGCS(work / store, bucket="bench")
    return LocalAzure(work / store, container="bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="s3,gcs,azure", help="object stores, comma-separated")
    parser.add_argument("--appends", type=int, default=40, help="appends per writer")
    parser.add_argument("--roots", type=int, default=1000, help="roots per append (x3 rows)")
    parser.add_argument("--writers", default="1,2", help="writers at once, comma-separated")
    parser.add_argument(
        "--reconcile-roots", type=int, default=20000, help="roots the reconcile folds (0: none)"
    )
    parser.add_argument("--workdir", help="where the local warehouse and the stores' data go")
    args = parser.parse_args()
    counts = [int(n) for n in args.writers.split(",")]
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ackfold-bench-store-"))
    results: dict[str, Any] = {"appends": args.appends, "roots": args.roots}
    servers = {store: _server(store, work) for store in stores}
    bases = {"local": str(work / "local")}
    try:
        for store, server in servers.items():
            server.start()
            os.environ.update(server.env())
            bases[store] = server.warehouse("bench").removesuffix("/bench")
        for writers in counts:
            for store, base in bases.items():
                warehouse = f"{base}/w{writers}"
                server = servers.get(store)
                log = server.log_file if server is not None else None
                before = len(log.read_text().splitlines()) if log else 0
                row = run(warehouse, writers, args.appends, args.roots)
                if log is not None:
                    lines = [unquote(x) for x in log.read_text().splitlines()[before:]]
                    mine = [line for line in lines if f"/w{writers}/" in line]
                    row["requests_per_append"] = round(len(mine) / (writers * args.appends), 1)
                    row["raced"] = sum(
                        ('" 412 ' in line or '" 409 ' in line) and "_delta_log" in line
                        for line in mine
                    )
                results[f"{store}_{writers}"] = row
                print(f"{store:>6} x{writers}: " + ", ".join(f"{k} {v}" for k, v in row.items()))
        if args.reconcile_roots:
            for store, base in bases.items():
                row = reconcile_speed(
                    f"{base}/reconcile", args.reconcile_roots, work / f"r-{store}"
                )
                results[f"{store}_reconcile"] = row
                print(f"{store:>6} reconcile: " + ", ".join(f"{k} {v}" for k, v in row.items()))
    finally:
        for server in servers.values():
            server.stop()
    for store in stores:
        for writers in counts:
            local, other = results[f"local_{writers}"], results[f"{store}_{writers}"]
            ratio = other["rows_per_s"] / local["rows_per_s"]
            results[f"{store}_to_local_{writers}"] = round(ratio, 2)
            print(f"{store} / local, {writers} writer(s): {ratio:.2f} of the rows per second")
        if args.reconcile_roots:
            ratio = (
                results[f"{store}_reconcile"]["reconcile_s"]
                / results["local_reconcile"]["reconcile_s"]
            )
            results[f"{store}_reconcile_to_local"] = round(ratio, 2)
            print(f"{store} / local: the reconcile takes {ratio:.2f} times as long")
    print(json.dumps(results, indent=2))
    sys.stdout.flush()
    os._exit(0)  # delta-rs may abort at interpreter exit (delta-rs#2184)


if __name__ == "__main__":
    main()
