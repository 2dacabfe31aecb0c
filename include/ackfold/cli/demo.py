"""`ackfold demo` (the word-count demo and its delivery report) and `ackfold status` (what
a running app last wrote about itself)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from ackfold.cli.common import AddCommand, UsageError, emit, spark_session

if TYPE_CHECKING:
    from ackfold.config import Settings


def add_commands(command: AddCommand) -> None:
    """Register `ackfold demo` and `ackfold status`, with their arguments."""
    demo = command(
        "demo",
        _demo,
        "run the word-count demo on SQS with seeded faults, then print its delivery report",
    )
    from ackfold.demo.flags import add_demo_flags

    add_demo_flags(demo)
    demo.add_argument(
        "--keep-running", action="store_true", help="after the report, keep the app running"
    )
    demo.add_argument(
        "--airflow",
        action="store_true",
        help="with --keep-running: leave reconcile and replay to the Airflow DAGs, and the "
        "app to its own DAG if apps.wordcount.dag gives it one (make run)",
    )
    demo.add_argument("--json", action="store_true", help="also print the report as JSON")
    status = command("status", _status, "the status of a running app, as it last wrote it")
    status.add_argument("--app", default="wordcount", help="the app (default wordcount)")


def _demo(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.demo.flags import demo_options

    if args.airflow and not args.keep_running:
        raise UsageError("--airflow goes with --keep-running: it hands the running app's "
                         "reconcile and replay to the Airflow DAGs")  # fmt: skip
    try:
        messages, faults = demo_options(settings.demo.faults, args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    import threading

    from ackfold.demo.run import Demo, demo_lock
    from ackfold.local.stack import start_sources, stop_all

    # SQS or Kafka on loopback, unless remote or already running.
    sources = start_sources(settings, emit)
    try:
        # The app's DAG, if it has one, waits: one driver of its queries at a time.
        with demo_lock(settings, "ackfold demo", say=emit):
            spark = spark_session(settings, "ackfold-demo")
            try:
                demo = Demo(spark, settings, messages=messages, faults=faults, say=emit)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            report = demo.run()
            if args.json:
                emit(json.dumps(report.as_dict(), indent=2))
            if args.keep_running:
                stop = threading.Event()
                try:
                    demo.keep_running(stop, airflow=args.airflow)
                except KeyboardInterrupt:
                    stop.set()
                except RuntimeError as exc:
                    print(f"ackfold: the demo app stopped: {exc}", file=sys.stderr)
                    return 1
    finally:
        stop_all(sources)
    return 0 if report.ok else 1


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.demo.run import status_file

    path = status_file(settings, args.app)
    if not path.is_file():
        print(f"ackfold: no status for app {args.app!r}: it has not run here ({path})",
              file=sys.stderr)  # fmt: skip
        return 1
    emit(path.read_text())
    return 0
