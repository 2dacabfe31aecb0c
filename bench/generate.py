"""Write a synthetic ledger through the real tables: for benchmarks, scale tests and demos.

    .venv/bin/python bench/generate.py --warehouse var/warehouse --roots 1000000
        [--fanout 2] [--depth 2] [--fail-rate 0.01] [--missing-rate 0.01]
        [--late-rate 0.001] [--app synthetic] [--first-root 0] [--start 2026-01-01T00:00:00Z]

Each root is a complete tuple tree (`fanout` children per tuple, `depth` levels below the
spout tuple); a fraction of roots fail at a leaf, a fraction miss one ack (they time out),
and a fraction of events are appended late, after the others. Roots start a millisecond
apart from `--start`. Then `ackfold reconcile --now <after the last root>` folds them.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path

from ackfold.config import load_settings
from ackfold.ledger.reading.parse import parse_time
from ackfold.ledger.schema.tables import Ledger
from ackfold.spark import get_spark

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkout  # noqa: F401  (before settings load: the checkout's var/)
from synth import EPOCH, Synthetic


def fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction between 0 and 1")
    return value


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def iso_time(text: str) -> datetime:
    try:
        return parse_time(text, "--start")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", help="the ledger (default: the configured warehouse)")
    parser.add_argument("--roots", type=positive, required=True)
    parser.add_argument("--fanout", type=positive, default=2)
    parser.add_argument("--depth", type=int, choices=range(0, 8), default=2)
    parser.add_argument("--fail-rate", type=fraction, default=0.01)
    parser.add_argument("--missing-rate", type=fraction, default=0.01)
    parser.add_argument("--late-rate", type=fraction, default=0.001)
    parser.add_argument("--app", default="synthetic")
    parser.add_argument("--first-root", type=int, default=0, help="to add roots to a ledger")
    parser.add_argument(
        "--start", type=iso_time, default=EPOCH, help="when the first root starts (ISO time)"
    )
    args = parser.parse_args()
    if args.fail_rate + args.missing_rate > 1:
        parser.error("--fail-rate and --missing-rate add up to more than 1")
    settings = load_settings(**({"warehouse": args.warehouse} if args.warehouse else {}))
    synth = Synthetic(
        roots=args.roots, fanout=args.fanout, depth=args.depth, fail_rate=args.fail_rate,
        missing_rate=args.missing_rate, late_rate=args.late_rate, app=args.app,
        first_root=args.first_root, start=args.start,
    )  # fmt: skip
    spark = get_spark(settings, app_name="ackfold-generate")
    began = time.perf_counter()
    synth.write(spark, Ledger(settings.table_root))
    seconds = time.perf_counter() - began
    print(
        f"wrote {synth.roots:,} roots and {synth.events:,} events ({synth.events_per_root} per "
        f"root) to {settings.table_root} in {seconds:.1f} s; the last root starts at "
        f"{synth.end.isoformat()}"
    )
    spark.stop()


if __name__ == "__main__":
    main()
