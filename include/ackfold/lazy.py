"""Names a package imports on first use (PEP 562): importing the package costs nothing
until one of them is used (`ackfold --version` builds no settings model, and
`python -m ackfold.quality.docs_assets` imports no validator).

Example, in a package's `__init__.py`:

    _LAZY = {"Settings": "ackfold.config.settings"}

    def __getattr__(name: str) -> Any:
        return lazy.attribute(__name__, _LAZY, name)
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib import import_module
from typing import Any


def attribute(package: str, modules: Mapping[str, str], name: str) -> Any:
    """`package`'s attribute `name`, imported from the module `modules` names for it and
    kept in the package, so that later lookups do not come here."""
    module = modules.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    setattr(sys.modules[package], name, value)
    return value
