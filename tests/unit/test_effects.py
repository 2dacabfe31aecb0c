"""Declared outputs and the effects found there (issue 58), on delta-rs tables on disk: an
app's outputs are declared once per tracker, the settings win, a contract-v1 ledger has
none, and a root's rows are counted per output by its origin, with clear words for an
output that is missing or has no origin column."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from ackfold.config import load_settings
from ackfold.effects import (
    OutputDeclarationError,
    UnknownRoots,
    dead_letter_effects,
    declare_output,
    declared_outputs,
    root_effects,
)
from ackfold.ledger.commits.outputs import declare_written, read_declared
from ackfold.ledger.schema.tables import DECLARED_OUTPUTS
from tests.effects_ledger import COUNTS_PER_ROOT, ROOTS_OF, WORDS_PER_ROOT, effects_ledger


def test_a_ledger_without_the_table_declares_nothing_and_reading_it_is_no_error(
    tmp_path: Path,
) -> None:
    settings = load_settings(var_dir=tmp_path / "var", warehouse=str(tmp_path / "v1"))
    assert declared_outputs(settings) == []
    assert not (tmp_path / "v1" / DECLARED_OUTPUTS).exists()  # a read made nothing


def test_write_batch_declares_each_output_once_per_tracker_and_keeps_an_explicit_one(
    tmp_path: Path,
) -> None:
    from ackfold.ledger.commits import outputs as outputs_module
    from ackfold.ledger.commits.outputs import declare_once

    warehouse = str(tmp_path / "w")
    declare_output(warehouse, "orders", f"{warehouse}/counts", origin_column="origin", clean=True)
    table = f"{warehouse}/{DECLARED_OUTPUTS}"
    before = DeltaTable(table).version()
    outputs_module._DECLARED.clear()  # a fresh process
    outputs = [f"{warehouse}/words", f"{warehouse}/counts"]
    declare_once(warehouse, "orders", outputs)
    assert DeltaTable(table).version() == before + 1  # words only: counts was declared
    for _ in range(3):  # later batches, of any tracker of the process: no commit
        declare_once(warehouse, "orders", outputs)
    assert DeltaTable(table).version() == before + 1
    declared = {d.output: d for d in read_declared(warehouse)}
    assert declared[f"{warehouse}/counts"].clean  # write_batch left it as declared
    assert declared[f"{warehouse}/counts"].origin_column == "origin"
    assert declared[f"{warehouse}/words"].declared_by == "write_batch"
    # A new process (a tracker's fresh start) reads once and declares nothing again.
    assert declare_written(warehouse, "orders", outputs) == []


def test_a_declaration_that_fails_never_stops_the_apps_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ackfold.ledger.commits import outputs as outputs_module
    from ackfold.ledger.commits.outputs import declare_once

    outputs_module._DECLARED.clear()
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")  # the warehouse cannot be written
    declare_once(str(blocked), "orders", ["/lake/t"])
    assert "could not declare its outputs /lake/t" in caplog.text
    assert "apps.orders.outputs" in caplog.text


def test_the_settings_declare_outputs_and_win_over_the_ledger(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "w")
    declare_output(warehouse, "orders", "/lake/counts", declared_by="write_batch")
    settings = load_settings(
        var_dir=tmp_path / "var",
        warehouse=warehouse,
        apps={"orders": {"outputs": [{"path": "/lake/counts", "origin_column": "o",
                                      "clean": True}]}},
    )  # fmt: skip
    (only,) = declared_outputs(settings, "orders")
    assert (only.origin_column, only.clean, only.declared_by) == ("o", True, "settings")
    assert declared_outputs(settings, "other") == []


@pytest.mark.parametrize(
    ("column", "message"),
    [("origin root", "origin_column must be a plain column name"), ("x;--", "plain column")],
)
def test_an_origin_column_that_is_no_plain_name_is_refused(
    tmp_path: Path, column: str, message: str
) -> None:
    with pytest.raises(OutputDeclarationError, match=message):
        declare_output(str(tmp_path), "orders", "/lake/t", origin_column=column)
    with pytest.raises(OutputDeclarationError, match="table's location"):
        declare_output(str(tmp_path), "orders", " ")


def test_a_roots_effects_are_its_origins_rows_per_output_with_a_sample(tmp_path: Path) -> None:
    ledger = effects_ledger(tmp_path)
    dead = ROOTS_OF["dead"]
    effects = root_effects(ledger.settings, dead.root_id, sample=2)
    by_output = {o.output.output: o for o in effects.outputs}
    assert by_output[ledger.words].rows == WORDS_PER_ROOT
    assert by_output[ledger.counts].rows == COUNTS_PER_ROOT
    assert len(by_output[ledger.words].sample) == 2
    assert {row["origin_root_id"] for row in by_output[ledger.words].sample} == {dead.origin}
    assert effects.rows == WORDS_PER_ROOT + COUNTS_PER_ROOT
    assert effects.has_effects
    # The outputs it cannot read say why, each, and stop nothing.
    problems = effects.problems
    assert "no Delta table at" in problems[ledger.missing]
    assert "apps.<app>.outputs" in problems[ledger.missing]
    assert "has no column 'origin_root_id'" in problems[ledger.nocolumn]
    assert effects.as_dict()["outputs"][0]["rows"] >= 0  # JSON-ready


def test_an_unknown_root_is_named(tmp_path: Path) -> None:
    ledger = effects_ledger(tmp_path)
    with pytest.raises(UnknownRoots, match="0x000000000000002a"):
        root_effects(ledger.settings, 42)


def test_each_dead_letter_says_whether_it_left_effects(tmp_path: Path) -> None:
    ledger = effects_ledger(tmp_path)
    found = dead_letter_effects(ledger.settings, app="orders")
    dead = {f.root_id for f in ROOTS_OF.values() if f.status == "dead_lettered"}
    assert {e.root.root_id for e in found} == dead
    assert all(e.has_effects and e.rows == WORDS_PER_ROOT + COUNTS_PER_ROOT for e in found)
    assert all(o.sample == () for e in found for o in e.outputs)  # counts only by default
    assert dead_letter_effects(ledger.settings, app="nobody") == []


def test_the_examples_in_the_docstrings_run() -> None:
    import doctest

    from ackfold.effects import errors, params, retract
    from ackfold.ledger.commits import outputs

    for module in (outputs, params, errors, retract):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module
