"""One error base: every error class the package and the development wing define derives
from `ackfold.AckfoldError`, and those that callers also catch by a standard class keep it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import ackfold
from ackfold.errors import AckfoldError
from tests.conftest import PROJECT_DIR

ROOTS = {
    "ackfold": PROJECT_DIR / "include" / "ackfold",
    "ackfold_dev": PROJECT_DIR / "dev" / "ackfold_dev",
}
# Not an ackfold refusal: the demo's stand-in for an app that crashes, whatever its cause.
NOT_REFUSALS = {"ackfold.demo.faults.InjectedKill"}
# The standard classes callers catch these by, kept beside the base.
STANDARD = {
    "ackfold.config.settings.ConfigError": ValueError,
    "ackfold.ledger.errors.LedgerBusy": TimeoutError,
    "ackfold.ledger.errors.AppBusy": TimeoutError,
    "ackfold.replay.planner.UnknownRoots": LookupError,
    "ackfold.replay.params.ReplayParamsError": ValueError,
    "ackfold.ledger.reading.parse.QueryError": ValueError,
    "ackfold.ledger.schema.ids.IdError": ValueError,
}
_STANDARD_BASES = {"Exception", "RuntimeError", "ValueError", "LookupError", "TimeoutError"}


def _classes() -> dict[str, tuple[str, list[str]]]:
    """Every public class of the two packages, read from the source (importing them all
    would load Spark, Airflow and GX): its name -> (`module.Class`, its bases' names)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for package, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            module = ".".join((package, *parts)).removesuffix(".__init__")
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    bases = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
                    found.setdefault(node.name, (f"{module}.{node.name}", bases))
    return found


def _error_classes() -> dict[str, bool]:
    """Each error class (`module.Class`): whether it derives from `AckfoldError`."""
    classes = _classes()

    def lineage(name: str) -> set[str]:
        _, bases = classes.get(name, ("", []))
        return {name}.union(*(lineage(b) for b in bases if b != name))

    return {
        classes[name][0]: "AckfoldError" in lineage(name)
        for name in classes
        if name != "AckfoldError" and lineage(name) & (_STANDARD_BASES | {"AckfoldError"})
    }


def _load(name: str) -> type:
    module, _, cls = name.rpartition(".")
    loaded: type = getattr(importlib.import_module(module), cls)
    return loaded


def test_every_error_derives_from_the_one_base() -> None:
    errors = _error_classes()
    # The scan finds them all: the ledger's, the settings', the wing's servers'.
    assert {
        "ackfold.ledger.errors.NoLedger",
        "ackfold.config.settings.ConfigError",
        "ackfold.ui.filters.FieldError",
        "ackfold_dev.kafka_broker.KafkaBrokerError",
    } <= set(errors)
    assert len(errors) >= 40, errors
    outside = sorted(name for name, based in errors.items() if not based)
    assert outside == sorted(NOT_REFUSALS)


@pytest.mark.parametrize(("name", "standard"), sorted(STANDARD.items()))
def test_errors_keep_the_standard_class_callers_catch(name: str, standard: type) -> None:
    assert issubclass(_load(name), standard)
    assert issubclass(_load(name), AckfoldError)


def test_the_base_is_exported_at_the_top_and_catches_a_refusal(tmp_path: Path) -> None:
    assert ackfold.AckfoldError is AckfoldError
    assert "AckfoldError" in ackfold.__all__
    # A real refusal, caught by the base: a setting out of range.
    with pytest.raises(AckfoldError, match="reconcile"):
        ackfold.load_settings(reconcile={"lookback": "-1h"})
