"""What every `ackfold` command shares: how it is registered, how it prints, and how it
fails (`UsageError`: exit 2; a ledger that cannot answer: exit 1)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from ackfold.config import Settings

EXIT_USAGE = 2

# A command: its settings and arguments in, its exit code out.
Handler = Callable[[Settings, argparse.Namespace], int]
# Registers a command (name, handler, help) and returns its parser, for its arguments.
AddCommand = Callable[[str, Handler, str], argparse.ArgumentParser]


class UsageError(Exception):
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


def ledger_error(exc: Exception) -> int:
    """Say what the ledger (or a source) cannot do; exit code 1."""
    print(f"ackfold: {exc}", file=sys.stderr)
    return 1


def check_app(settings: Settings, reader: Any, app: str | None) -> None:
    """Raise `LedgerError` for an app neither configured nor seen in the ledger, and
    `NoLedger` when there is no ledger yet: both without starting a JVM."""
    from ackfold.ledger.sql import LedgerError

    if app and app not in settings.apps and not reader.app_has_events(app):
        known = ", ".join(sorted(settings.apps)) or "none configured"
        raise LedgerError(f"unknown app {app!r}: no event of it in the ledger (apps: {known})")
    if not app:
        reader.app_has_events("")  # raises NoLedger when ack_events does not exist yet
