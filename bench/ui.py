"""Reliability UI benchmark: read latencies of its pages on a large ledger, no JVM.

    .venv/bin/python bench/ui.py [--roots 2000000] [--days 30] [--workdir DIR]

Writes a synthetic `root_state` (one commit per day, one `first_event_date` partition per
day, in time order like the reconciler's), a matching `dead_letters`, and times each UI
request end to end through the FastAPI app (routing, delta-rs queries, templates): warm,
median of 5 runs, one line per request, then a JSON summary. Record the figures in
docs/benchmarks.md with the command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake
from fastapi import Request
from fastapi.testclient import TestClient

from ackfold import status
from ackfold.config import load_settings
from ackfold.tables import DEAD_LETTERS, ROOT_STATE, TABLE_PROPERTIES, TABLES, Ledger
from ackfold.ui.app import create_app
from ackfold.ui.security import Viewer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.ledger_fixtures import arrow_schema

START = datetime(2026, 10, 1, tzinfo=UTC)
# Mostly healthy, as a real ledger: about 8% of roots need someone.
MIX = {
    status.COMPLETED: 0.90,
    status.FAILED: 0.03,
    status.TIMED_OUT: 0.02,
    status.REPLAYED: 0.02,
    status.DEAD_LETTERED: 0.01,
    status.PENDING: 0.01,
    status.COMPLETED_LATE: 0.01,
}
STAGES = ("spout", "parse", "enrich", "sink")


def write_ledger(warehouse: Path, roots: int, days: int) -> None:
    rng = np.random.default_rng(7)
    ledger = Ledger(str(warehouse))
    schema = arrow_schema(ROOT_STATE)
    per_day = roots // days
    names, weights = list(MIX), list(MIX.values())
    dead_rows = []
    for day in range(days):
        n = per_day
        base = int((START + timedelta(days=day)).timestamp() * 1_000_000)
        first = base + np.sort(rng.integers(0, 86_400_000_000, n))
        last = first + rng.integers(50_000, 30_000_000, n)  # 50 ms to 30 s
        ids = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
        states = rng.choice(names, n, p=weights)
        stages = rng.choice(STAGES, n)
        ts = pa.timestamp("us", tz="UTC")
        columns = {
            "root_id": pa.array(ids),
            "app": pa.array(rng.choice(["orders", "clicks", "payments"], n)),
            "status": pa.array(states),
            "xor_acc": pa.array(np.zeros(n, dtype=np.int64)),
            "event_count": pa.array(rng.integers(2, 12, n)),
            "first_event_at": pa.array(first, ts),
            "last_event_at": pa.array(last, ts),
            "status_changed_at": pa.array(last, ts),
            "attempt": pa.array(np.ones(n, dtype=np.int32)),
            "origin_root_id": pa.array(ids),
            "last_stage": pa.array(stages),
            "fail_reason": pa.array(np.where(states == "failed", "bad record", None)),
            "last_event_id": pa.array(np.full(n, "e")),
            "init_seen": pa.array(np.ones(n, dtype=bool)),
            "seen_event_hashes": pa.array([[]] * n, pa.list_(pa.int64())),
            "reconciled_at": pa.array(last, ts),
            "first_event_date": pa.array(
                np.full(n, np.datetime64((START + timedelta(days=day)).date(), "D"))
            ),
        }
        table = pa.table(
            {f.name: columns.get(f.name) or pa.nulls(n, f.type) for f in schema}, schema
        )
        write_deltalake(
            ledger.path(ROOT_STATE),
            table,
            mode="append",
            partition_by=[TABLES[ROOT_STATE][1]],
            configuration=dict(TABLE_PROPERTIES),
        )
        dead = np.flatnonzero(states == "dead_lettered")
        for i in dead[:200]:
            dead_rows.append(
                {
                    "root_id": int(ids[i]),
                    "app": "orders",
                    "origin_root_id": int(ids[i]),
                    "attempt": 3,
                    "source": "sqs",
                    "dead_letter_queue": "orders-dlq",
                    "reason": "bad record",
                    "last_stage": str(stages[i]),
                    "dead_lettered_at": datetime.fromtimestamp(last[i] / 1e6, UTC),
                }
            )
    dl = arrow_schema(DEAD_LETTERS)
    write_deltalake(
        ledger.path(DEAD_LETTERS),
        pa.Table.from_pylist([{n: r.get(n) for n in dl.names} for r in dead_rows], dl),
        mode="append",
        configuration=dict(TABLE_PROPERTIES),
    )


async def bench_viewer(request: Request) -> Viewer:
    return Viewer(id="bench", name="bench", token=None)


def timed(client: TestClient, path: str, params: dict[str, str], runs: int) -> tuple[float, int]:
    client.get(path, params=params)  # warm: table snapshots, page cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        response = client.get(path, params=params)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, (path, params, response.text[:300])
    return statistics.median(times), response.status_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roots", type=int, default=2_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ackfold-bench-ui-"))
    warehouse = work / "warehouse"
    if not (warehouse / ROOT_STATE).exists():
        start = time.perf_counter()
        write_ledger(warehouse, args.roots, args.days)
        print(f"wrote {args.roots} root_state rows in {time.perf_counter() - start:.1f}s")
    settings = load_settings(var_dir=work / "var", warehouse=str(warehouse))
    app = create_app(settings, viewer=bench_viewer, csrf_secret=b"bench")
    client = TestClient(app)
    last_day = (START + timedelta(days=args.days - 1)).date().isoformat()
    cases = [
        ("roots: default (unhealthy, newest first, 50)", "/api/roots", {}),
        ("roots: HTML page", "/roots", {}),
        ("roots: app + status failed", "/api/roots", {"app": "orders", "status": "failed"}),
        (
            "roots: stage + since",
            "/api/roots",
            {"stage": "enrich", "since": f"{last_day}T00:00:00Z"},
        ),
        ("roots: page 20 (offset 1000)", "/api/roots", {"offset": "1000"}),
        ("roots: sort by event_count asc", "/api/roots", {"sort": "event_count", "order": "asc"}),
        (
            "roots: sort by root_id, all statuses",
            "/api/roots",
            {"sort": "root_id", "status": ",".join(status.ALL)},
        ),
        ("overview: all apps, all time", "/api/overview", {}),
        ("overview: one app, HTML", "/overview", {"app": "orders"}),
        ("overview: last day", "/api/overview", {"since": f"{last_day}T00:00:00Z"}),
        ("dead letters", "/api/dead-letters", {}),
    ]
    results = {}
    for label, path, params in cases:
        seconds, _ = timed(client, path, params, args.runs)
        results[label] = round(seconds * 1000, 1)
        print(f"{label:<44} {seconds * 1000:8.1f} ms")
    print(json.dumps({"roots": args.roots, "days": args.days, "median_ms": results}, indent=2))
    sys.stdout.flush()
    os._exit(0)  # delta-rs may abort at interpreter exit (DESIGN.md)


if __name__ == "__main__":
    main()
