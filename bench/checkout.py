"""Run from a checkout, a benchmark keeps its state in the checkout's `var/`, as `make`
does (`ACKFOLD_VAR_DIR`): the jar cache that `make setup` filled is there. An
`ACKFOLD_VAR_DIR` already set wins. Every script imports this before it loads settings.

Example:
    >>> import os
    >>> os.environ["ACKFOLD_VAR_DIR"].endswith("var")
    True
"""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
os.environ.setdefault("ACKFOLD_VAR_DIR", str(CHECKOUT / "var"))
