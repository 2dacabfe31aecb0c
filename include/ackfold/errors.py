"""`AckfoldError`, the base of every error ackfold raises on purpose: the one class a
caller catches to tell ackfold's refusals (bad settings, a busy or missing ledger, a
failed replay, a violated guarantee) from anything else. Each package keeps its own
errors in one module, and each derives from this base; an error that callers also catch
by a standard class keeps it beside the base (`ConfigError` is a `ValueError`,
`LedgerBusy` a `TimeoutError`, `UnknownRoots` a `LookupError`).

This module imports nothing, so every package may import it without a circle.

Example:
    >>> from ackfold import AckfoldError, ConfigError
    >>> from ackfold.ledger.errors import LedgerBusy
    >>> issubclass(ConfigError, AckfoldError), issubclass(ConfigError, ValueError)
    (True, True)
    >>> issubclass(LedgerBusy, AckfoldError), issubclass(LedgerBusy, TimeoutError)
    (True, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["AckfoldError", "ParamsError"]


class AckfoldError(Exception):
    """An error ackfold raises on purpose; its message says what is at fault and how to
    fix it."""


class ParamsError(AckfoldError, ValueError):
    """A manual DAG's conf is invalid (`ReplayParamsError`, `RetractParamsError`):
    `problems` maps every bad field to its fix, and the message lists them."""

    # What the message calls the request: "invalid {what} (fields): ...".
    what: ClassVar[str] = "request"

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        lines = "\n  ".join(f"{key}: {why}" for key, why in self.problems.items())
        # The fields on the first line too: failure hooks and alerts show only that line.
        names = ", ".join(self.problems)
        super().__init__(f"invalid {self.what} ({names}):\n  {lines}")

    def __reduce__(self) -> tuple[type[ParamsError], tuple[dict[str, str]]]:
        # Airflow may pickle a task's exception: rebuild from the problems, not the text.
        return (type(self), (self.problems,))
