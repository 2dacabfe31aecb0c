"""The `ackfold` command line: the parser of every command group, and `main`.

Every error a user can cause (bad settings, a missing jar cache, bad arguments, a server
that does not answer) ends in one clear message on stderr and a non-zero exit, without a
traceback; Spark logs its errors only. `--verbose` (`-v`), before or after the command,
brings back Spark's warnings, ackfold's log lines and the tracebacks. An unexpected
exception is a bug: its traceback is always shown. Each command group is a module of this
package (`local`, `replay`, `demo`, `ledger`, `doctor`, `jobs`, `read`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ackfold import __version__
from ackfold.cli import demo, doctor, jobs, ledger, local, read, replay
from ackfold.cli.common import EXIT_USAGE, Handler, UsageError, error_line, verbosity

if TYPE_CHECKING:
    from ackfold.config import Settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ackfold",
        description="Guaranteed message processing for Spark streaming: ledger, reconcile, replay.",
    )
    parser.add_argument("--version", action="version", version=f"ackfold {__version__}")
    _add_verbose(parser, default=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func: Handler, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(func=func)
        _add_verbose(sub, default=argparse.SUPPRESS)  # keeps a --verbose given before it
        return sub

    # In the order `ackfold --help` lists them.
    local.add_commands(command)
    replay.add_commands(command)
    demo.add_commands(command)
    command("config", _config, "print the effective configuration as JSON")
    ledger.add_commands(command)
    doctor.add_commands(command)
    jobs.add_commands(command)
    read.add_commands(command)
    return parser


def _add_verbose(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="also show Spark's warnings, ackfold's log lines and the traceback of an error",
    )


def _config(settings: Settings, args: argparse.Namespace) -> int:
    print(json.dumps(settings.model_dump(mode="json"), indent=2, sort_keys=True))
    return 0


def load_settings() -> Settings:
    """The settings of this run, loaded once a command runs: `--version` and `--help`
    import none of them (building every settings model is most of the start-up)."""
    from ackfold.config import load_settings as load

    return load()


def run(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, run the command, and turn user errors into messages and exit codes."""
    parser = build_parser()
    args = parser.parse_args(argv)  # `--version` and `--help` end here: no setting loaded
    # The errors a user can cause, once a command runs.
    from ackfold.config import ConfigError
    from ackfold.ledger.errors import (
        LedgerConflict,
        MissingDeltaRs,
        SparkCommitRefused,
        UnsafeStore,
    )
    from ackfold.ledger.lock import LedgerBusy
    from ackfold.sources.base import SourceError
    from ackfold.spark.jars import JarsError
    from ackfold.spark.python import WorkerPythonMismatch
    from ackfold.spark.session import SparkConnectError, SparkMasterUnreachable

    with _verbose(args.verbose):
        try:
            settings = load_settings()
            code: int = args.func(settings, args)
            return code
        except (ConfigError, JarsError, UsageError) as exc:
            error_line(exc)
            return EXIT_USAGE
        except (
            SparkMasterUnreachable,
            SparkConnectError,
            WorkerPythonMismatch,
            SourceError,
            LedgerBusy,
            LedgerConflict,
            UnsafeStore,
            SparkCommitRefused,
            MissingDeltaRs,
        ) as exc:
            # A source queue or a Spark endpoint that cannot be reached or refuses, a
            # ledger another run kept or kept changing: say which, no traceback.
            error_line(exc)
            return 1
        except KeyboardInterrupt:
            print("ackfold: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


# A shell's exit status for a command stopped by Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130


@contextmanager
def _verbose(on: bool) -> Iterator[None]:
    """For one run: `--verbose` sets `verbosity` (tracebacks, Spark's warnings) and shows
    ackfold's own log lines from INFO up, with their time and logger. Without it, ackfold
    says warnings only, whatever level an embedding process gave the root logger."""
    logger = logging.getLogger("ackfold")
    level = logger.level
    verbosity.verbose = on
    if on:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logger.setLevel(logging.INFO)
    else:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        verbosity.verbose = False
        logger.setLevel(level)


def main() -> None:
    code = run()
    sys.stdout.flush()
    sys.stderr.flush()
    if "deltalake" in sys.modules:
        # delta-rs can abort at interpreter exit (delta-rs#2184): leave without the teardown.
        os._exit(code)
    sys.exit(code)
