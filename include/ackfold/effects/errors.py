"""The errors of finding and retracting a root's effects, in one module that imports
nothing of ackfold but the error bases (`OutputDeclarationError`, of a declaration, is the
ledger's, where declarations are recorded: re-exported here).

Example:
    >>> issubclass(RetractRefused, EffectsError), issubclass(OutputUnreadable, EffectsError)
    (True, True)
    >>> issubclass(OutputDeclarationError, ValueError)
    True
"""

from __future__ import annotations

from collections.abc import Mapping

from ackfold.errors import AckfoldError, ParamsError
from ackfold.ledger.errors import OutputDeclarationError

__all__ = [
    "EffectsError",
    "OutputDeclarationError",
    "OutputUnreadable",
    "RetractParamsError",
    "RetractRefused",
    "UnknownRoots",
]


class EffectsError(AckfoldError):
    """Finding or retracting effects failed: the message says which and how to fix it."""


class OutputUnreadable(EffectsError):
    """A declared output cannot be read for a root's effects: no table at its path, no
    origin column, a layout delta-rs cannot read. Reported per output, never raised
    out of `find_effects`; raised by a retract that would delete from it."""


class UnknownRoots(EffectsError):
    """Root ids that `root_state` does not know."""

    def __init__(self, root_ids: tuple[int, ...]) -> None:
        from ackfold.ledger.schema.ids import format_id

        self.root_ids = root_ids
        listed = ", ".join(format_id(r) for r in root_ids)
        super().__init__(f"unknown root id(s), not in root_state: {listed}")


class RetractRefused(EffectsError):
    """A retract asked by root id was refused for some of them (not dead-lettered, a later
    attempt completed, a replay in flight): `refused` maps each root id to why. Nothing
    was deleted."""

    def __init__(self, refused: Mapping[int, str]) -> None:
        from ackfold.ledger.schema.ids import format_id

        self.refused = dict(refused)
        lines = "\n  ".join(f"{format_id(r)}: {why}" for r, why in self.refused.items())
        super().__init__(f"retract refused, nothing deleted:\n  {lines}")

    def __reduce__(self) -> tuple[type[RetractRefused], tuple[dict[int, str]]]:
        return (type(self), (self.refused,))


class RetractParamsError(EffectsError, ParamsError):
    """A manual retract conf is invalid: the message lists every bad field and its fix."""

    what = "retract request"
