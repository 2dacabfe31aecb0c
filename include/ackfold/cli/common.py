"""What every `ackfold` command shares: how it is registered, how it prints, how it fails
(`UsageError`: exit 2; a ledger that cannot answer: exit 1), and its Spark session.

An expected error is one line on stderr; `--verbose` adds its traceback, and Spark's own
warnings, for whoever needs to dig (`verbosity`).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ackfold.errors import AckfoldError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ackfold.config import Settings

EXIT_USAGE = 2

# A command: its settings and arguments in, its exit code out.
Handler = Callable[["Settings", argparse.Namespace], int]
# Registers a command (name, handler, help) and returns its parser, for its arguments.
AddCommand = Callable[[str, Handler, str], argparse.ArgumentParser]


def add_wait(parser: argparse.ArgumentParser) -> None:
    """`--wait SECONDS`: how long a command that writes root_state waits for its turn
    while a reconcile, replay or maintenance run (of a DAG, on any host) holds the ledger."""
    parser.add_argument(
        "--wait",
        metavar="SECONDS",
        type=_seconds,
        default=3600.0,
        help="wait at most this long for another reconcile, replay or maintenance run to "
        "finish (default 3600; 0: refuse at once)",
    )


def add_selection(parser: argparse.ArgumentParser, what: str) -> None:
    """The selection of roots `ackfold replay` and `ackfold retract` share: `--root`,
    `--app`, `--since`, `--until`, `--limit` (`parse_selection` reads them)."""
    parser.add_argument(
        "--root", nargs="+", action="extend", metavar="ID", help="only these root ids"
    )
    parser.add_argument("--app", metavar="APP", help="only the roots of this app")
    parser.add_argument(
        "--since", metavar="TIME", help="only roots whose status changed at or after TIME"
    )
    parser.add_argument(
        "--until", metavar="TIME", help="only roots whose status changed before TIME"
    )
    parser.add_argument("--limit", metavar="N", help=f"at most N {what}, oldest first")


def parse_selection(args: argparse.Namespace) -> dict[str, Any]:
    """The typed selection of `add_selection`'s arguments (root_ids, app, since, until,
    limit), for a `ReplayRequest` or a `RetractRequest`; `UsageError` names a bad one."""
    from ackfold.ledger.reading.parse import QueryError, parse_limit, parse_root_id, parse_time
    from ackfold.reconcile.reconciler import check_app_name

    try:
        if args.app:
            check_app_name(args.app)
        return {
            "root_ids": tuple(dict.fromkeys(parse_root_id(text) for text in args.root or ())),
            "app": args.app,
            "since": parse_time(args.since, "--since") if args.since else None,
            "until": parse_time(args.until, "--until") if args.until else None,
            "limit": parse_limit(args.limit) if args.limit is not None else None,
        }
    except (QueryError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 0 to 86400")
    return value


def say_on_stderr(text: str) -> None:
    """Tell the user what the command waits for (a line on stderr)."""
    print(f"ackfold: {text}", file=sys.stderr, flush=True)


class UsageError(AckfoldError):
    """Bad input from the user: printed as is, exit code 2."""


def emit(text: str) -> None:
    """Print `text`; a reader that went away (`ackfold roots | head`) is not an error."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so the exit's flush has nowhere to fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


class Verbosity:
    """How much a command says: set once per run from `--verbose` (`cli.main.run`)."""

    verbose = False


verbosity = Verbosity()


def error_line(exc: BaseException) -> None:
    """Print an expected error as one line on stderr; with `--verbose`, its traceback first."""
    if verbosity.verbose:
        traceback.print_exception(exc, file=sys.stderr)
    print(f"ackfold: {exc}", file=sys.stderr)


def ledger_error(exc: Exception) -> int:
    """Say what the ledger (or a source) cannot do; exit code 1."""
    error_line(exc)
    return 1


def spark_session(settings: Settings, app_name: str) -> SparkSession:
    """The command's Spark session: Spark's own warnings hidden, unless `--verbose`."""
    from ackfold.spark import get_spark

    return get_spark(settings, app_name=app_name, quiet=not verbosity.verbose)


def check_app(settings: Settings, reader: Any, app: str | None) -> None:
    """Raise `LedgerError` for an app neither configured nor seen in the ledger, and
    `NoLedger` when there is no ledger yet: both without starting a JVM."""
    from ackfold.ledger.errors import LedgerError

    if app and app not in settings.apps and not reader.app_has_events(app):
        known = ", ".join(sorted(settings.apps)) or "none configured"
        raise LedgerError(f"unknown app {app!r}: no event of it in the ledger (apps: {known})")
    if not app:
        reader.app_has_events("")  # raises NoLedger when ack_events does not exist yet
