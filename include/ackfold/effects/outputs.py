"""Declared outputs as an app's settings and its ledger say them together: the ledger's
rows (`ackfold.ledger.commits.outputs`: what `write_batch`, `declare_output` and `ackfold outputs
--declare` recorded), then the settings' `apps.<app>.outputs`, which win.

Example:
    >>> [d.output for d in declared_outputs(settings, "wordcount")]   # doctest: +SKIP
    ['/warehouse/counted', '/warehouse/words']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ackfold.ledger.commits.outputs import (
    ORIGIN_COLUMN,
    SETTINGS,
    DeclaredOutput,
    declare_output,
    read_declared,
)

if TYPE_CHECKING:
    from ackfold.config import Settings

__all__ = ["ORIGIN_COLUMN", "DeclaredOutput", "declare_output", "declared_outputs", "read_declared"]


def declared_outputs(settings: Settings, app: str | None = None) -> list[DeclaredOutput]:
    """Every declared output of `app` (or of every app): the ledger's declarations, then the
    settings' `apps.<app>.outputs`, which replace the ledger's of the same table. Sorted by
    app, then output."""
    merged = {(d.app, d.output): d for d in read_declared(settings.table_root, app=app)}
    for name, overrides in settings.apps.items():
        if app is not None and name != app:
            continue
        for setting in overrides.outputs:
            merged[(name, setting.path)] = DeclaredOutput(
                name, setting.path, setting.origin_column, setting.clean, SETTINGS
            )
    return [merged[key] for key in sorted(merged)]
