"""UI and CLI read latency on a large ledger, no JVM: the Reliability UI's requests and the
`ackfold roots` and `ackfold show` commands.

    .venv/bin/python bench/ui.py [--roots 10000000] [--days 30] [--workdir DIR]

Writes a synthetic ledger day by day, in time order like the apps and the reconciler
write it: `root_state` (one commit and one `first_event_date` partition per day), `roots`,
`ack_events` (an init and two acks per root) and `dead_letters`. Then it times each UI
request end to end through the FastAPI app (routing, delta-rs queries, templates) and
each CLI command as a user runs it (a new process: Python start-up included): warm,
the median of 5 runs of wall and of CPU time (the steadier figure on a shared machine),
one line each, then a JSON summary. Record the figures in
docs/benchmarks.md with the command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from fastapi import Request
from fastapi.testclient import TestClient

from ackfold.config import load_settings
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ACK_EVENTS, DEAD_LETTERS, ROOT_STATE, ROOTS
from ackfold.ui.app import create_app
from ackfold.ui.security import Viewer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import checkout  # noqa: F401  (before settings load: the checkout's var/)

from tests.ledger_fixtures import append_columns, write_rows

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
EVENTS_PER_ROOT = 3  # an init and two acks
PROJECT_DIR = Path(__file__).resolve().parents[1]


def events_of(ids: np.ndarray, first: np.ndarray, last: np.ndarray) -> dict[str, pa.Array]:
    """`ack_events` columns for roots `ids`: an init at `first`, acks between and at `last`."""
    n = len(ids)
    roots = np.repeat(ids, EVENTS_PER_ROOT)
    step = np.tile(np.arange(EVENTS_PER_ROOT), n)
    times = np.repeat(first, EVENTS_PER_ROOT) + (
        np.repeat(last - first, EVENTS_PER_ROOT) * step // (EVENTS_PER_ROOT - 1)
    )
    root_text = pa.array(roots).cast(pa.string())
    event_ids = pc.binary_join_element_wise(root_text, pa.array(step.astype(str)), "-")
    kinds = np.where(step == 0, "init", "ack")
    return {
        "event_id": event_ids,
        "app": pa.array(np.repeat(np.array(["orders"]), n * EVENTS_PER_ROOT)),
        "root_id": pa.array(roots),
        "kind": pa.array(kinds),
        "ack_val": pa.array(np.zeros(n * EVENTS_PER_ROOT, dtype=np.int64)),
        "stage": pa.array(np.array(STAGES)[np.minimum(step, len(STAGES) - 1)]),
        "event_time": pa.array(times, pa.timestamp("us", tz="UTC")),
    }


def write_ledger(warehouse: Path, roots: int, days: int) -> dict[str, int]:
    """Write the ledger; return a root to open of each kind (a dead letter, a middle one)."""
    rng = np.random.default_rng(7)
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
            "init_seen": pa.array(np.ones(n, dtype=bool)),
            "seen_event_hashes": pa.array([[]] * n, pa.list_(pa.int64())),
            "reconciled_at": pa.array(last, ts),
            "first_event_date": pa.array(
                np.full(n, np.datetime64((START + timedelta(days=day)).date(), "D"))
            ),
        }
        append_columns(warehouse, ROOT_STATE, columns, n)
        ts_first = pa.array(first, ts)
        registered = {
            "root_id": columns["root_id"],
            "app": columns["app"],
            "attempt": columns["attempt"],
            "origin_root_id": columns["origin_root_id"],
            "source": pa.array(np.full(n, "sqs")),
            "source_queue": pa.array(np.full(n, "orders")),
            "source_message_id": pa.array(ids).cast(pa.string()),
            "payload": pa.array(np.full(n, '{"order": 1, "token": "secret"}')),
            "ingested_at": ts_first,
        }
        append_columns(warehouse, ROOTS, registered, n)
        append_columns(warehouse, ACK_EVENTS, events_of(ids, first, last), n * EVENTS_PER_ROOT)
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
        if day == days // 2:
            middle = int(ids[n // 2])
    write_rows(warehouse, DEAD_LETTERS, dead_rows)
    return {"dead letter": dead_rows[-1]["root_id"], "mid-history": middle}


def timed_cli(settings_env: dict[str, str], argv: list[str], runs: int) -> tuple[float, float]:
    """The median wall and CPU times of `ackfold ARGV` in a new process, as a user runs
    it (its CPU: the child's user and system time)."""
    command = [str(Path(sys.executable).parent / "ackfold"), *argv]
    env = {**os.environ, **settings_env}
    times, cpus = [], []
    for _ in range(runs + 1):  # the first warms the page cache
        before = os.times()
        start = time.perf_counter()
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        after = os.times()
        cpus.append(
            after.children_user
            - before.children_user
            + after.children_system
            - before.children_system
        )
        assert result.returncode == 0, (argv, result.stderr[-500:])
    return statistics.median(times[1:]), statistics.median(cpus[1:])


async def bench_viewer(request: Request) -> Viewer:
    return Viewer(id="bench", name="bench", token=None)


def timed(client: TestClient, path: str, params: dict[str, str], runs: int) -> tuple[float, float]:
    """The median wall and CPU times of a request (its CPU: every thread of this process,
    DataFusion's included): on a shared machine, the CPU time is the steadier figure."""
    client.get(path, params=params)  # warm: table snapshots, page cache
    times, cpus = [], []
    for _ in range(runs):
        cpu = time.process_time()
        start = time.perf_counter()
        response = client.get(path, params=params)
        times.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        assert response.status_code == 200, (path, params, response.text[:300])
    return statistics.median(times), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roots", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ackfold-bench-ui-"))
    warehouse = work / "warehouse"
    samples_file = work / "samples.json"
    if not samples_file.exists():
        start = time.perf_counter()
        samples = write_ledger(warehouse, args.roots, args.days)
        samples_file.write_text(json.dumps(samples))
        print(
            f"wrote {args.roots:,} roots (root_state, roots, {EVENTS_PER_ROOT} ack_events each) "
            f"in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
    samples = json.loads(samples_file.read_text())
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
        *(
            (f"root page: {kind}, HTML", f"/roots/{root_id}", {})
            for kind, root_id in samples.items()
        ),
    ]
    results, cpu = {}, {}
    for label, path, params in cases:
        seconds, cpu_seconds = timed(client, path, params, args.runs)
        results[label] = round(seconds * 1000, 1)
        cpu[label] = round(cpu_seconds * 1000, 1)
        print(f"{label:<50} {seconds * 1000:8.1f} ms {cpu_seconds * 1000:8.1f} ms CPU", flush=True)
    env = {"ACKFOLD_VAR_DIR": str(work / "var"), "ACKFOLD_WAREHOUSE": str(warehouse)}
    commands = [
        ("cli: ackfold --version (start-up alone)", ["--version"]),
        ("cli: ackfold roots", ["roots"]),
        ("cli: ackfold roots --status failed --app orders",
         ["roots", "--status", "failed", "--app", "orders"]),
        *((f"cli: ackfold show <{kind}>", ["show", str(root)]) for kind, root in samples.items()),
    ]  # fmt: skip
    for label, argv in commands:
        seconds, cpu_seconds = timed_cli(env, argv, args.runs)
        results[label] = round(seconds * 1000, 1)
        cpu[label] = round(cpu_seconds * 1000, 1)
        print(f"{label:<50} {seconds * 1000:8.1f} ms {cpu_seconds * 1000:8.1f} ms CPU", flush=True)
    summary = {"roots": args.roots, "days": args.days, "median_ms": results, "median_cpu_ms": cpu}
    print(json.dumps(summary, indent=2))
    sys.stdout.flush()
    os._exit(0)  # delta-rs may abort at interpreter exit (DESIGN.md)


if __name__ == "__main__":
    main()
