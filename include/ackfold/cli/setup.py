"""`ackfold setup`: the pinned JVM jars into the local cache, once, for Spark's side."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ackfold.cli.common import AddCommand
from ackfold.spark.jars import BUNDLES

if TYPE_CHECKING:
    from ackfold.config import Settings


def add_commands(command: AddCommand) -> None:
    """Register `ackfold setup`, with its arguments."""
    setup = command("setup", _setup, "download the pinned JVM jars into the local cache (once)")
    setup.add_argument(
        "--bundle", action="append", choices=sorted(BUNDLES), help="only this bundle"
    )


def _setup(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.spark.jars import BASE_BUNDLES, setup, store_bundle

    assert settings.jars_dir is not None
    connector = store_bundle(settings.table_root)  # only the warehouse's store's
    default = [*BASE_BUNDLES, *([connector.name] if connector else [])]
    setup(settings.jars_dir, args.bundle or default)
    print(f"JVM artifacts ready in {settings.jars_dir}")
    return 0
