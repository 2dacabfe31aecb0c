"""`ackfold status`: what a running app last wrote about itself (the word count's status
file). `ackfold demo`, which runs the demo on local servers, is a development command
(`ackfold_dev.commands`)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ackfold.cli.common import AddCommand, emit

if TYPE_CHECKING:
    from ackfold.config import Settings


def add_commands(command: AddCommand) -> None:
    """Register `ackfold status`, with its arguments."""
    status = command("status", _status, "the status of a running app, as it last wrote it")
    status.add_argument("--app", default="wordcount", help="the app (default wordcount)")


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.demo.run import status_file

    path = status_file(settings, args.app)
    if not path.is_file():
        print(f"ackfold: no status for app {args.app!r}: it has not run here ({path})",
              file=sys.stderr)  # fmt: skip
        return 1
    emit(path.read_text())
    return 0
