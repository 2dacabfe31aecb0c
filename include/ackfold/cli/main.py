"""The `ackfold` command line: the parser of every command group, and `main`.

Every error a user can cause (bad settings, a missing jar cache, bad arguments) ends in
one clear message on stderr and a non-zero exit, never a traceback. Each command group is
a module of this package (`local`, `replay`, `demo`, `jobs`, `read`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from ackfold import __version__
from ackfold.cli import demo, jobs, local, read, replay
from ackfold.cli.common import EXIT_USAGE, Handler, UsageError
from ackfold.config import ConfigError, Settings, load_settings
from ackfold.local.jvm import JarsError
from ackfold.sources.base import SourceError
from ackfold.spark import SparkMasterUnreachable


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ackfold",
        description="Guaranteed message processing for Spark streaming: ledger, reconcile, replay.",
    )
    parser.add_argument("--version", action="version", version=f"ackfold {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func: Handler, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(func=func)
        return sub

    # In the order `ackfold --help` lists them.
    local.add_commands(command)
    replay.add_commands(command)
    demo.add_commands(command)
    command("config", _config, "print the effective configuration as JSON")
    jobs.add_commands(command)
    read.add_commands(command)
    return parser


def _config(settings: Settings, args: argparse.Namespace) -> int:
    print(json.dumps(settings.model_dump(mode="json"), indent=2, sort_keys=True))
    return 0


def run(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, run the command, and turn user errors into messages and exit codes."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
        code: int = args.func(settings, args)
        return code
    except (ConfigError, JarsError, UsageError) as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (SparkMasterUnreachable, SourceError) as exc:
        # A source queue that cannot be reached or refuses: say which, no traceback.
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def main() -> None:
    code = run()
    sys.stdout.flush()
    sys.stderr.flush()
    if "deltalake" in sys.modules:
        # delta-rs can abort at interpreter exit (delta-rs#2184): leave without the teardown.
        os._exit(code)
    sys.exit(code)
