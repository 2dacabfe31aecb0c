"""The `ackfold` command line.

Every error a user can cause (bad settings, a missing jar cache, bad arguments) ends in
one clear message on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence

from ackfold import __version__
from ackfold.config import ConfigError, Settings, load_settings
from ackfold.jvm import BUNDLES, JarsError

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input from the user: printed as is, exit code 2."""


def _setup(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.jvm import setup

    assert settings.jars_dir is not None
    setup(settings.jars_dir, args.bundle or None)
    print(f"JVM artifacts ready in {settings.jars_dir}")
    return 0


def _up(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.stack import run_stack

    return run_stack(settings)


def _config(settings: Settings, args: argparse.Namespace) -> int:
    print(json.dumps(settings.model_dump(mode="json"), indent=2, sort_keys=True))
    return 0


def _smoke(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.smoke import check, run_smoke
    from ackfold.spark import get_spark

    report = run_smoke(get_spark(settings, "ackfold-smoke"), f"{settings.table_root}/smoke")
    print(json.dumps(report, sort_keys=True))
    return 0 if check(report) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ackfold",
        description="Guaranteed message processing for Spark streaming: ledger, reconcile, replay.",
    )
    parser.add_argument("--version", action="version", version=f"ackfold {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, func: Callable[[Settings, argparse.Namespace], int], help: str
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(func=func)
        return sub

    setup = command("setup", _setup, "download the pinned JVM jars into the local cache (once)")
    setup.add_argument(
        "--bundle", action="append", choices=sorted(BUNDLES), help="only this bundle"
    )
    command("up", _up, "run the embedded stack (airflow standalone) until Ctrl-C")
    command("config", _config, "print the effective configuration as JSON")
    command("smoke", _smoke, "run the Delta round trip in local Spark")
    return parser


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


def main() -> None:
    code = run()
    sys.stdout.flush()
    sys.stderr.flush()
    if "deltalake" in sys.modules:
        # delta-rs can abort at interpreter exit (delta-rs#2184): leave without the teardown.
        os._exit(code)
    sys.exit(code)
