"""The `ackfold` command line: the parser of every command group, and `main`.

Every error a user can cause (bad settings, a missing jar cache, bad arguments, a server
that does not answer) ends in one clear message on stderr and a non-zero exit, without a
traceback; Spark logs its errors only. `--verbose` (`-v`), before or after the command,
brings back Spark's warnings, ackfold's log lines and the tracebacks. An unexpected
exception is a bug: its traceback is always shown. Each command group is a module of this
package (`setup`, `replay`, `demo`, `ledger`, `doctor`, `jobs`, `maintain`, `retract`, `read`).

Other distributions add commands through the entry-point group `ackfold.commands`: each
entry point is an `add_commands(command)` function, as each module here has. A checkout's
development wing (`ackfold-dev`: `ackfold up`, `demo` and the local servers) is one; a
production install does not have it, and names its commands as development commands
(`DEVELOPMENT_COMMANDS`). The group is read only for a command that is not ackfold's own,
or for `--help`: it costs a scan of every installed distribution.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from ackfold.cli import demo, doctor, jobs, ledger, maintain, read, replay, retract, setup
from ackfold.cli.common import EXIT_USAGE, Handler, UsageError, error_line, verbosity
from ackfold.version import __version__

if TYPE_CHECKING:
    from ackfold.config import Settings

# The entry-point group through which other distributions add commands.
COMMANDS_GROUP = "ackfold.commands"
# The commands of the development wing (`dev/` in a checkout, the `ackfold-dev`
# distribution): without it, each still parses, and says where it runs.
DEVELOPMENT_COMMANDS = ("up", "demo", "sqs", "s3", "gcs", "azure", "kafka", "cluster", "connect")


def build_parser(*, plugins: bool = True) -> argparse.ArgumentParser:
    """The parser of every command; with `plugins`, also those of `COMMANDS_GROUP`."""
    return _parser(plugins)[0]


def _parser(plugins: bool) -> tuple[argparse.ArgumentParser, set[str]]:
    """The parser, and the names of ackfold's own commands in it."""
    parser = argparse.ArgumentParser(
        prog="ackfold",
        description="Guaranteed message processing for Spark streaming: ledger, reconcile, replay.",
    )
    parser.add_argument("--version", action="version", version=f"ackfold {__version__}")
    _add_verbose(parser, default=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    added: set[str] = set()

    def command(name: str, func: Handler, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(func=func)
        _add_verbose(sub, default=argparse.SUPPRESS)  # keeps a --verbose given before it
        added.add(name)
        return sub

    # In the order `ackfold --help` lists them.
    setup.add_commands(command)
    before = set(added)
    for plugin in entry_points(group=COMMANDS_GROUP) if plugins else ():
        plugin.load()(command)
    plugged = added - before
    for name in DEVELOPMENT_COMMANDS:
        if name not in added:
            command(name, _development_only, "a development command: run it from a checkout "
                    "of ackfold (make install)")  # fmt: skip
    replay.add_commands(command)
    retract.add_commands(command)
    demo.add_commands(command)
    command("config", _config, "print the effective configuration as JSON")
    ledger.add_commands(command)
    doctor.add_commands(command)
    jobs.add_commands(command)
    maintain.add_commands(command)
    read.add_commands(command)
    return parser, added - set(DEVELOPMENT_COMMANDS) - plugged


def _add_verbose(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="also show Spark's warnings, ackfold's log lines and the traceback of an error",
    )


def _development_only(settings: Settings, args: argparse.Namespace) -> int:
    raise UsageError(
        f"`ackfold {args.command}` is a development command: run it in a checkout of "
        "ackfold, where `make install` installs the development wing (dev/, the "
        "ackfold-dev distribution) beside the package"
    )


def _wants_plugins(argv: Sequence[str], own: set[str]) -> bool:
    """Whether `argv` may need a command of `COMMANDS_GROUP`: it names no command of
    ackfold's own `own`, or asks for the list of commands (`--help` before any)."""
    command = next((word for word in argv if not word.startswith("-")), None)
    options = argv[: argv.index(command)] if command else argv
    if "--version" in options:
        return False  # answered before any command: the scan would only slow it
    return command not in own or bool({"-h", "--help"} & set(options))


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
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, own = _parser(plugins=False)
    if _wants_plugins(argv, own):
        parser = build_parser(plugins=True)
    # Whatever a development command is given, it says where it runs.
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.func is not _development_only:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    # The errors a user can cause, once a command runs: every `AckfoldError` is one line
    # (its traceback with --verbose); anything else is a bug and keeps its traceback.
    from ackfold.config import ConfigError
    from ackfold.errors import AckfoldError
    from ackfold.spark.jars import JarsError

    with _verbose(args.verbose):
        try:
            settings = load_settings()
            code: int = args.func(settings, args)
            return code
        except (ConfigError, JarsError, UsageError) as exc:
            error_line(exc)
            return EXIT_USAGE
        except AckfoldError as exc:
            # A ledger, a source queue or a Spark endpoint that refuses, cannot be reached
            # or was changed under the run: say which, no traceback.
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
