"""`ackfold demo` with faults on an object-store warehouse, as a user runs it, against the
same demo on the local disk, one after the other in one run.

    .venv/bin/python bench/demo_store.py [--stores local,s3,gcs] [--messages 600]

For each store it starts the local store (`ackfold_dev`: moto's S3 API, or the GCS or
Azure emulator), points the standard variables at it (`AWS_*`, `GOOGLE_SERVICE_ACCOUNT`,
`AZURE_*`) and Spark's connector settings (`ACKFOLD_SPARK__CONF`), and runs
`ackfold demo --json` with its default faults (drops, fails, poison and stuck messages, a
killed query; `--no-faults` for none) on a warehouse there: the tracked word count,
reconciles and replays until every message is settled, and the delivery report. With
faults a run takes many minutes whatever the size (its cycles wait out the timeouts of
the stuck messages): the suite runs it without (tests/bench). It prints each report's line and
wall time, and a JSON summary; it exits 1 if a run lost a message or miscounted a word.
Record the output in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]


def _server(store: str, work: Path) -> Any:
    if store == "s3":
        from ackfold_dev.s3 import LocalS3

        return LocalS3(work / "s3", bucket="ackfold")
    if store == "gcs":
        from ackfold_dev.gcs import LocalGCS

        return LocalGCS(work / "gcs", in_memory=True)  # Spark's checkpoints: `ackfold_dev.gcs`
    from ackfold_dev.azurite import LocalAzure

    return LocalAzure(work / "azure")


def demo(store: str, messages: int, work: Path, flags: list[str]) -> dict[str, Any]:
    """One `ackfold demo --json` on `store`; its report, wall time and exit code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACKFOLD_", "AWS_"))}
    from ackfold_dev.ports import free_port

    # Its own SQS server on a free port: another demo on this machine keeps the default one.
    env |= {"ACKFOLD_VAR_DIR": str(work / f"var-{store}"),
            "ACKFOLD_JARS_DIR": str(PROJECT / "var" / "jars"),
            "ACKFOLD_SQS__ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}  # fmt: skip
    server = None if store == "local" else _server(store, work)
    try:
        if server is not None:
            server.start()
            env |= server.env()
            env["ACKFOLD_WAREHOUSE"] = server.warehouse("demo")
            env["ACKFOLD_SPARK__CONF"] = json.dumps(server.spark_conf())
        start = time.perf_counter()
        done = subprocess.run(
            [str(PROJECT / ".venv" / "bin" / "ackfold"), "demo", "--json",
             "--messages", str(messages), *flags],
            env=env, capture_output=True, text=True, check=False, cwd=work,
        )  # fmt: skip
        seconds = time.perf_counter() - start
    finally:
        if server is not None:
            server.stop()
    report = _report(done.stdout)
    said = f"lost {report['lost']}, words exact: {report['words_exact']}" if report else "no report"
    print(f"{store:>6}: exit {done.returncode} in {seconds:.0f} s; {said}", flush=True)
    if report is None or done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", file=sys.stderr)
    return {"exit": done.returncode, "seconds": round(seconds, 1), "report": report}


def _report(out: str) -> dict[str, Any] | None:
    start = out.find("\n{")
    if start < 0:
        return None
    try:
        loaded: dict[str, Any] = json.loads(out[start + 1 :])
    except ValueError:
        return None
    return loaded


def main() -> int:
    # A run stopped by SIGTERM still stops its stores (`demo`'s finally).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="local,s3,gcs", help="comma-separated")
    parser.add_argument("--messages", type=int, default=600, help="sentences per demo")
    parser.add_argument("--workdir", help="where the stores and var dirs go")
    parser.add_argument(
        "--no-faults", action="store_true", help="no faults: one cycle, not the replays'"
    )
    args = parser.parse_args()
    flags = ["--no-faults"] if args.no_faults else []
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ackfold-bench-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    results = {store: demo(store, args.messages, work, flags) for store in args.stores.split(",")}
    print(json.dumps(results, indent=2, default=str))
    ok = all(r["exit"] == 0 and r["report"] and r["report"]["lost"] == 0 for r in results.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
