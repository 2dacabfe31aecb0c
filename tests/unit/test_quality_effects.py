"""The quality suite of what dead letters leave behind, on the embedded engine (delta-rs
and DuckDB, no JVM): per declared output, the rows the app's dead letters have there,
counted; an output marked clean fails while a dead letter has any, and passes once they
are retracted; an output that cannot be read is said; an app that declares no output has
no such suite (a contract-v1 ledger checks as before). The Spark engine's run takes the
same counts: `tests/e2e/test_wordcount_demo.py` runs it on the demo's ledger."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from ackfold.effects import RetractRequest, run_retract
from ackfold.effects.outputs import declare_output
from ackfold.quality import QualityReport
from ackfold.quality.effects import CLEAN_OUTPUT, DEAD_LETTER_ROWS
from ackfold.runs import run_quality
from tests.quality_ledger import APP, FaultyLedger, faulty_ledger, quality_settings

SUITE = f"delivery.{APP}.dead_letter_effects"


def _ledger(var: Path) -> tuple[FaultyLedger, str]:
    """The healthy quality ledger (its poison message is its one dead letter) and an
    output of its app: 2 rows of the dead letter's origin, 3 of a completed message's."""
    ledger = faulty_ledger(var / "warehouse", faults=False)
    output = f"{var}/lines"
    origins = [ledger.poison[0]] * 2 + [ledger.good[0]] * 3
    write_deltalake(output, pa.table({
        "origin_root_id": pa.array(origins, pa.int64()),
        "n": pa.array(range(len(origins)), pa.int64()),
    }))  # fmt: skip
    return ledger, output


def _effects(report: QualityReport) -> list[tuple[str, bool, str]]:
    return [(r.check, r.success, r.observed) for r in report.results if r.suite == SUITE]


def test_a_dead_letters_rows_are_counted_per_output_and_fail_an_output_marked_clean(
    tmp_path: Path,
) -> None:
    var = tmp_path / "var"
    ledger, output = _ledger(var)
    counted = f"{var}/elsewhere"
    write_deltalake(counted, pa.table({"origin_root_id": pa.array([ledger.poison[0]] * 4)}))
    settings = quality_settings(
        var, apps={APP: {"quality": {"max_dead_letter_rate": 0.1},
                         "outputs": [{"path": output, "clean": True}]}},
    )  # fmt: skip
    declare_output(settings.table_root, APP, counted)  # by the app: not clean

    report = run_quality(settings, now=ledger.late)
    assert _effects(report) == [
        (DEAD_LETTER_ROWS, True, "4"),  # `elsewhere` sorts first: counted, not judged
        (CLEAN_OUTPUT, False, "2"),
    ]
    (violation,) = report.violations
    assert output in violation.description
    assert f"ackfold retract --app {APP}" in violation.description

    summary = run_retract(
        settings, RetractRequest(root_ids=(ledger.poison[1],), dry_run=False, requested_by="t")
    )
    assert summary.deleted == {counted: 4, output: 2}
    again = run_quality(settings, now=ledger.late)
    assert again.passed, again.violation_message()
    assert _effects(again) == [(DEAD_LETTER_ROWS, True, "0"), (CLEAN_OUTPUT, True, "0")]


def test_a_dead_letter_that_a_replay_by_hand_completed_is_no_longer_counted(
    tmp_path: Path,
) -> None:
    from deltalake import DeltaTable

    from ackfold.ledger.schema import status
    from ackfold.ledger.schema.tables import ROOT_STATE
    from tests.ledger_fixtures import write_rows

    var = tmp_path / "var"
    ledger, output = _ledger(var)
    settings = quality_settings(var)
    declare_output(settings.table_root, APP, output, clean=True)
    assert not run_quality(settings, now=ledger.late).passed
    # Attempt 3 of the poison message, sent by hand, completed: its rows are its output.
    state = DeltaTable(f"{settings.table_root}/{ROOT_STATE}").to_pyarrow_table().to_pylist()
    (dead,) = [row for row in state if row["root_id"] == ledger.poison[1]]
    write_rows(settings.table_root, ROOT_STATE, [
        {**dead, "root_id": dead["root_id"] + 1, "attempt": 3, "status": status.COMPLETED,
         "xor_acc": 0, "fail_reason": None}
    ])  # fmt: skip
    report = run_quality(settings, now=ledger.late)
    assert _effects(report) == [(CLEAN_OUTPUT, True, "0")]


def test_an_output_that_cannot_be_read_is_said_and_fails(tmp_path: Path) -> None:
    var = tmp_path / "var"
    ledger, _ = _ledger(var)
    settings = quality_settings(var)
    declare_output(settings.table_root, APP, f"{var}/missing", clean=True)
    report = run_quality(settings, now=ledger.late)
    ((check, success, _),) = _effects(report)
    assert (check, success) == (CLEAN_OUTPUT, False)
    (violation,) = report.violations
    assert "cannot be read" in violation.description
    assert f"{var}/missing" in violation.description


def test_an_app_that_declares_no_output_has_no_effects_suite(tmp_path: Path) -> None:
    var = tmp_path / "var"
    ledger, _ = _ledger(var)
    report = run_quality(quality_settings(var), now=ledger.late)
    assert report.passed, report.violation_message()
    assert _effects(report) == []


@pytest.mark.parametrize("clean", [False, True])
def test_the_suite_has_one_check_per_output_named_by_its_mark(clean: bool) -> None:
    from ackfold.effects.outputs import DeclaredOutput
    from ackfold.quality.effects import OutputCount, effects_row, effects_suite

    counts = [
        OutputCount(DeclaredOutput(APP, "/w/a", clean=clean), 3, 1),
        OutputCount(DeclaredOutput(APP, "/w/b"), None, 0, "no Delta table at /w/b"),
    ]
    suite = effects_suite(APP, counts)
    checks = [e.meta["check"] for e in suite.expectations]  # type: ignore[index]
    assert checks == [CLEAN_OUTPUT if clean else DEAD_LETTER_ROWS, DEAD_LETTER_ROWS]
    assert effects_row(counts) == {"rows_0": 3, "rows_1": None}
    assert "no Delta table at /w/b" in str(suite.expectations[1].description)
