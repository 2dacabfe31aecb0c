"""The word-count demo's flags, shared by `ackfold demo` and `ackfold/jobs/wordcount.py`:
the run's size and its faults, on top of the configured `demo.faults`.

Light to import (the CLI builds its parser with it); Spark comes in only with the faults.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the settings' models cost most of the CLI's start-up
    from ackfold.config.demo import FaultSettings


def add_demo_flags(parser: argparse.ArgumentParser) -> None:
    """The run's size and faults as flags (`ackfold demo`, `ackfold/jobs/wordcount.py`);
    `demo_options` reads them."""
    parser.add_argument("--messages", metavar="N", help="sentences to send (demo.messages)")
    parser.add_argument("--seed", metavar="S", help="the faults' seed")
    parser.add_argument(
        "--drop", action="append", metavar="STAGE=F", help="STAGE drops this fraction of tuples"
    )
    parser.add_argument(
        "--fail", action="append", metavar="STAGE=F", help="STAGE fails this fraction of tuples"
    )
    parser.add_argument("--poison", metavar="N", help="poison messages, failing every attempt")
    parser.add_argument(
        "--stuck", metavar="N", help="messages an outage dead-letters half-counted; replay by hand"
    )
    parser.add_argument(
        "--slow", action="append", metavar="STAGE=DURATION", help="STAGE sleeps once a batch"
    )
    parser.add_argument(
        "--kill", action="append", metavar="STAGE", help="kill STAGE's query once, mid-batch"
    )
    parser.add_argument(
        "--no-faults", action="store_true", help="no faults at all (then add some with flags)"
    )


def demo_options(base: FaultSettings, args: argparse.Namespace) -> tuple[int | None, FaultSettings]:
    """The messages (None: `demo.messages`) and faults that `add_demo_flags`' flags ask
    for. Raises ValueError, naming the flag, for a bad value."""
    from ackfold.demo.run import faults_from_flags

    faults = faults_from_flags(
        base, no_faults=args.no_faults, seed=args.seed, drop=args.drop, fail=args.fail,
        poison=args.poison, stuck=args.stuck, slow=args.slow, kill=args.kill,
    )  # fmt: skip
    messages = None
    if args.messages is not None:
        if not args.messages.strip().isdigit():
            raise ValueError(f"--messages must be a whole number, got {args.messages!r}")
        messages = int(args.messages)
        if messages < 1:
            raise ValueError("--messages must be at least 1")
    return messages, faults
