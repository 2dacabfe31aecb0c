"""`ackfold smoke`, `reconcile` and `quality`: the Spark jobs, each run once in a local (or
the configured) Spark session. What can be checked without a JVM is checked first."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING

from ackfold.cli.common import (
    AddCommand,
    UsageError,
    add_wait,
    check_app,
    emit,
    ledger_error,
    say_on_stderr,
    spark_session,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ackfold.config import Settings


def add_commands(command: AddCommand) -> None:
    """Register `ackfold smoke`, `reconcile`, `quality`, with their arguments."""
    command("smoke", _smoke, "run the Delta round trip in local Spark")
    reconcile = command(
        "reconcile", _reconcile, "fold new ledger events into root_state; print roots by status"
    )
    reconcile.add_argument("--app", metavar="APP", help="only this app's events")
    reconcile.add_argument(
        "--replay",
        action="store_true",
        help="then run the automatic replay (as `ackfold replay --auto`)",
    )
    reconcile.add_argument(
        "--now",
        metavar="ISO-TIME",
        help="classify timeouts as of this time instead of the clock (replays, tests)",
    )
    add_wait(reconcile)
    quality = command(
        "quality",
        _quality,
        "check the delivery guarantees and the ledger with Great Expectations; exit 1 if "
        "any is violated",
    )
    quality.add_argument("--app", metavar="APP", help="only this app's roots and events")
    quality.add_argument(
        "--now", metavar="ISO-TIME", help="check as of this time instead of the clock"
    )
    quality.add_argument("--all", action="store_true", help="list every check, not only failures")
    quality.add_argument("--json", action="store_true", help="print the report as JSON")
    spark_app = command(
        "spark-app",
        _spark_app,
        "print the file of a packaged spark-submit entry point (without NAME: list them)",
    )
    spark_app.add_argument("name", nargs="?", metavar="NAME", help="e.g. reconcile.py")


def _spark_app(settings: Settings, args: argparse.Namespace) -> int:
    # For spark-submit by hand: `spark-submit ... "$(ackfold spark-app reconcile.py)"`.
    from ackfold.jobs import app_path, entry_points

    if args.name is None:
        print("\n".join(entry_points()))
        return 0
    name = args.name if args.name.endswith(".py") else f"{args.name}.py"
    if name not in entry_points():
        raise UsageError(f"no entry point {args.name!r}: one of {', '.join(entry_points())}")
    print(app_path(name))
    return 0


def _smoke(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.spark.smoke import check, run_smoke

    report = run_smoke(spark_session(settings, "ackfold-smoke"), f"{settings.table_root}/smoke")
    print(json.dumps(report, sort_keys=True))
    return 0 if check(report) else 1


def _reconcile(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.errors import LedgerError

    try:
        now = _checked_now(settings, args)
    except LedgerError as exc:
        return ledger_error(exc)

    from ackfold.runs.reconcile import run_reconcile

    def spark() -> SparkSession:
        return spark_session(settings, "ackfold-reconcile")

    # Each run takes the ledger's turn before any engine starts (a DAG run on another host
    # may hold it). Nothing new and no timeout due: no engine at all; else the embedded
    # engine in this process, or Spark (engine.kind).
    summary = run_reconcile(
        settings,
        now=now,
        app=args.app,
        spark=spark,
        holder="ackfold reconcile",
        wait=args.wait,
        say=say_on_stderr,
    )
    if args.replay:
        from ackfold.replay.request import ReplayRequest
        from ackfold.runs.replay import run_replay
        from ackfold.runs.replayer import unsent_error

        request = ReplayRequest(automatic=True, app=args.app, requested_by="auto")
        replayed = run_replay(
            settings,
            request,
            now=now,
            spark=spark,
            wait=args.wait,
            say=say_on_stderr,
            holder="ackfold reconcile",
        )
        if replayed.not_sent:
            emit(json.dumps(summary, indent=2))
            return ledger_error(unsent_error(replayed))
        summary["replay"] = replayed.as_dict()
    emit(json.dumps(summary, indent=2))
    return 0


def _quality(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.errors import LedgerError

    try:
        now = _checked_now(settings, args)
    except LedgerError as exc:
        return ledger_error(exc)

    from ackfold.runs import run_quality

    def spark() -> SparkSession:
        return spark_session(settings, "ackfold-quality")

    # On the embedded engine (the default) no JVM starts: DuckDB runs in this process; the
    # Spark engine starts its session when it first needs it.
    report = run_quality(
        settings,
        spark=spark,
        app=args.app,
        now=now,
        say=lambda text: print(text, file=sys.stderr),
    )
    emit(json.dumps(report.as_dict(), indent=2) if args.json else report.format(verbose=args.all))
    return 0 if report.passed else 1


def _checked_now(settings: Settings, args: argparse.Namespace) -> datetime | None:
    """`--now` of `reconcile` and `quality`, checked with `--app` before a JVM starts: a
    malformed value raises `UsageError`; an app neither configured nor in the ledger, or
    no ledger yet, `LedgerError`."""
    from ackfold.ledger.reading.parse import QueryError, parse_time
    from ackfold.ledger.reading.reader import LedgerReader
    from ackfold.reconcile.reconciler import check_app_name

    try:
        now = parse_time(args.now, "--now") if args.now else None
        if args.app:
            check_app_name(args.app)
    except (QueryError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    # Check what can be checked without a JVM first: an empty ledger, an unknown app.
    check_app(settings, LedgerReader(settings.table_root), args.app)
    return now
