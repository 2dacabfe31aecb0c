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

__all__ = ["AckfoldError"]


class AckfoldError(Exception):
    """An error ackfold raises on purpose; its message says what is at fault and how to
    fix it."""
