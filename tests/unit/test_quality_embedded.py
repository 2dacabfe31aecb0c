"""The quality checks on the embedded engine (DuckDB over delta-rs, no JVM): a healthy
ledger passes every check, and each fault is caught by its own expectation, naming the
root at fault, as `tests/sqs/test_quality.py` asserts of a ledger from the real cycle.
That both engines give the same outcomes is `tests/spark/test_quality_conformance.py`."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold.cli import main as cli
from ackfold.ledger.reading.reader import LedgerReader
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.ledger.schema.values import hex64
from ackfold.quality import QualityReport
from ackfold.runs import run_quality
from ackfold.runs.quality import quality_run_id
from tests.conftest import PROJECT_DIR
from tests.quality_ledger import APP, FaultyLedger, faulty_ledger, quality_settings


def caught(report: QualityReport) -> dict[str, str]:
    """Each violated check, as `suite check`, with its observed value and sample."""
    return {
        f"{r.suite} {r.check}": f"{r.observed} | {'; '.join(r.sample)}" for r in report.violations
    }


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FaultyLedger]:
    var = tmp_path_factory.mktemp("faulty") / "var"
    return var, faulty_ledger(var / "warehouse")


def test_a_healthy_ledger_passes_every_check(tmp_path: Path) -> None:
    var = tmp_path / "var"
    ledger = faulty_ledger(var / "warehouse", faults=False)
    settings = quality_settings(var)
    report = run_quality(settings, now=ledger.late)

    assert caught(report) == {}
    assert report.apps == (APP,)
    results = {f"{r.suite} {r.check}": r for r in report.results}
    lost = results[f"delivery.{APP}.overdue_roots no_lost_roots"]
    assert lost.element_count == 15 + 2 * 3 + 2, "every root was overdue, and settled"
    assert results[f"delivery.{APP}.sent_messages sent_registered"].element_count == 19
    # The app's own threshold (10%) applies, not the default (1%).
    dead = results[f"delivery.{APP}.rates dead_letter_rate"]
    assert (dead.observed, dead.threshold) == ("5.26%", "{'max_value': 0.1}")
    assert results["ledger.ack_events not_null.stage"].observed == "0 of 64 rows"

    rows = LedgerReader(settings.table_root).quality_run(report.run_id)
    assert len(rows) == len(report.results)
    # Data Docs: a page per suite, linked from the index, with its expectations, and the
    # run's validation of each suite (the ledger suites' computed by DuckDB too).
    assert report.docs is not None
    index = report.docs.read_text()
    for suite in {r.suite for r in report.results}:
        page = "expectations/" + suite.replace(".", "/") + ".html"
        assert f'href="{page}"' in index
        assert (report.docs.parent / page).is_file()
        validations = report.docs.parent / "validations" / suite.replace(".", "/")
        (validation,) = validations.rglob("*.html")
        # Named after the run and the suite, whether GX or DuckDB computed it.
        assert validation.relative_to(validations).parts[0] == report.run_id
        assert f"Data asset: {suite}<br>" in validation.read_text()
    assert "__none__" not in index
    rates = report.docs.parent / f"expectations/delivery/{APP}/rates.html"
    assert "dead_letter_rate" in rates.read_text()


def test_no_jvm_starts(faulty: tuple[Path, FaultyLedger]) -> None:
    """In a process of its own: this worker may hold a JVM of another tier's tests."""
    var, ledger = faulty
    script = (
        "import os, sys\n"
        "from datetime import datetime\n"
        "from pyspark import SparkContext\n"
        "from ackfold.runs import run_quality\n"
        "from tests.quality_ledger import quality_settings\n"
        "run_quality(quality_settings(sys.argv[1]), now=datetime.fromisoformat(sys.argv[2]))\n"
        "ok = SparkContext._gateway is None and SparkContext._active_spark_context is None\n"
        "sys.stdout.flush()\n"
        "os._exit(0 if ok else 3)\n"  # delta-rs may abort at exit (DESIGN.md)
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(var), ledger.early.isoformat()],
        cwd=PROJECT_DIR, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def ledger_faults(faulty: tuple[Path, FaultyLedger]) -> dict[str, str]:
    """Checked before any root of the window is overdue: the ledger faults show, and the
    latency of the trees that took an hour."""
    var, ledger = faulty
    return caught(run_quality(quality_settings(var), now=ledger.early))


LEDGER_FAULTS = {
    # check: (how the fault is named in its sample, the good root it hit or None)
    "ledger.ack_events not_null.stage": ("event_id=fault-null-stage", 0),
    "ledger.ack_events kind_in_domain": ("event_id=fault-kind", 1),
    "ledger.ack_events event_id_unique": ("event_id=", 2),
    "ledger.roots root_id_unique": ("root_id=", 3),
    "ledger.roots origin_chain_valid": ("root_id=", 4),
    "ledger.roots attempts_within_max": ("attempt=3, max_attempts=2", None),
    "ledger.root_state root_id_unique": ("root_id=", 5),
    "ledger.root_state status_in_domain": ("root_id=", 6),
    "ledger.root_state completed_xor_zero": ("xor_acc=42", 7),
    "ledger.root_state failed_has_reason": ("status=failed", 8),
}
EARLY_DELIVERY = {
    f"delivery.{APP}.rates latency_p99": "3,600.0 s",
    # Pending since ten days before the window: overdue wherever it sits in time.
    f"delivery.{APP}.overdue_roots no_lost_roots": "pending past its timeout",
}


def test_ledger_faults_trip_only_their_own_expectations(
    ledger_faults: dict[str, str], faulty: tuple[Path, FaultyLedger]
) -> None:
    _, ledger = faulty
    assert set(ledger_faults) == set(LEDGER_FAULTS) | set(EARLY_DELIVERY)
    # The two rows sharing an id, not the redelivered event and root written twice.
    assert ledger_faults["ledger.ack_events event_id_unique"].startswith("2 unexpected row(s)")
    assert ledger_faults["ledger.roots root_id_unique"].startswith("2 of ")
    redelivered = f"root_id={hex64(ledger.good[9])}"
    assert not [check for check, seen in ledger_faults.items() if redelivered in seen]
    lost = ledger_faults[f"delivery.{APP}.overdue_roots no_lost_roots"]
    assert lost.startswith("1 of 1 rows")
    assert f"root_id={hex64(ledger.ancient)}, outcome=pending past its timeout" in lost


@pytest.mark.parametrize("check", list(LEDGER_FAULTS))
def test_each_ledger_expectation_catches_its_fault(
    check: str, ledger_faults: dict[str, str], faulty: tuple[Path, FaultyLedger]
) -> None:
    _, ledger = faulty
    assert check in ledger_faults, f"{check} missed its fault"
    named, good = LEDGER_FAULTS[check]
    assert named in ledger_faults[check]
    if good is not None:
        assert f"root_id={hex64(ledger.good[good])}" in ledger_faults[check]


DELIVERY_FAULTS = {
    f"delivery.{APP}.overdue_roots no_lost_roots": "never reconciled",
    f"delivery.{APP}.sent_messages sent_registered": "source_message_id=never-registered",
    f"delivery.{APP}.rates duplicate_rate": "10.00%",
    f"delivery.{APP}.rates dead_letter_rate": "15.00%",
    f"delivery.{APP}.rates latency_p99": "3,600.0 s",
}


@pytest.fixture(scope="module")
def delivery_faults(
    faulty: tuple[Path, FaultyLedger], monkeypatch_module: pytest.MonkeyPatch
) -> tuple[int, str, QualityReport]:
    """Every root overdue, checked through the CLI (in this process, no JVM): its exit
    code, its output, and the run's report as `quality_results` holds it."""
    var, ledger = faulty
    monkeypatch_module.setenv("ACKFOLD_VAR_DIR", str(var))
    monkeypatch_module.setenv(
        "ACKFOLD_APPS", f'{{"{APP}": {{"quality": {{"max_dead_letter_rate": 0.1}}}}}}'
    )
    monkeypatch_module.setenv("ACKFOLD_DEFAULTS__MAX_ATTEMPTS", "2")
    monkeypatch_module.setenv("ACKFOLD_DEFAULTS__REPLAY_BACKOFF", "1s")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.run(["quality", "--now", ledger.late.isoformat()])
    rows = LedgerReader(quality_settings(var).table_root).quality_run()
    return code, out.getvalue(), QualityReport.from_rows(rows)


@pytest.fixture(scope="module")
def monkeypatch_module() -> object:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_delivery_faults_fail_the_command_naming_each_violation(
    delivery_faults: tuple[int, str, QualityReport], faulty: tuple[Path, FaultyLedger]
) -> None:
    _, ledger = faulty
    code, output, report = delivery_faults
    assert code == 1
    violations = caught(report)
    assert set(DELIVERY_FAULTS) <= set(violations)
    for check, observed in DELIVERY_FAULTS.items():
        (line,) = [x for x in output.splitlines() if f"FAILED {check}:" in x]
        assert observed in line
        assert observed in violations[check]
    lost = violations[f"delivery.{APP}.overdue_roots no_lost_roots"]
    assert lost.startswith("6 of 25 rows")
    assert f"root_id={hex64(ledger.flaky[0][0])}" in lost
    assert "replayed, but the next attempt never registered" in lost


def test_a_retried_run_replaces_its_rows(faulty: tuple[Path, FaultyLedger]) -> None:
    var, ledger = faulty
    settings = quality_settings(var)
    run = quality_run_id("asset_triggered__2026-11-23T10:00:00+00:00")
    first = run_quality(settings, now=ledger.early, run_id=run)
    run_quality(settings, now=ledger.early, run_id=run)
    rows = LedgerReader(settings.table_root).quality_run(run)
    assert len(rows) == len(first.results)


def test_a_schema_break_is_caught(tmp_path: Path) -> None:
    """A writer drops a contract column from ack_events, another writes payloads as bytes."""
    var = tmp_path / "var"
    faulty_ledger(var / "warehouse", faults=False)
    ledger = Ledger(str(var / "warehouse"))
    for name, change in (
        (ACK_EVENTS, lambda t: t.drop_columns(["stage"])),
        (ROOTS, lambda t: t.set_column(t.schema.get_field_index("payload"), "payload",
                                       t["payload"].cast(pa.binary()))),
    ):  # fmt: skip
        table = DeltaTable(ledger.path(name)).to_pyarrow_table()
        write_deltalake(ledger.path(name), change(table), mode="overwrite", schema_mode="overwrite")
    violations = caught(run_quality(quality_settings(var), now=FaultyLedger("").late))
    assert "missing columns stage" in violations.pop("ledger.ack_events columns")
    assert "BinaryType" in violations.pop("ledger.roots type.payload")
    # The missing column's own checks cannot pass either; nothing else fails.
    assert set(violations) <= {"ledger.ack_events type.stage", "ledger.ack_events not_null.stage"}


def test_a_run_for_one_app_checks_that_app(faulty: tuple[Path, FaultyLedger]) -> None:
    var, ledger = faulty
    report = run_quality(quality_settings(var, apps={"other": {}}), now=ledger.late, app=APP)
    assert report.scope == f"app {APP}"
    assert report.apps == (APP,)


def test_duckdb_gets_the_jobs_budget_less_what_the_process_and_gx_hold(tmp_path: Path) -> None:
    """`engine.memory_limit` bounds the job: a quality run over 10M events peaked at
    2.4 GB under a limit of 2 GB when DuckDB was given all of it (bench/quality.py)."""
    import doctest

    from ackfold.embedded import duck
    from ackfold.quality.checks import GX_RESERVE

    assert doctest.testmod(duck).failed == 0
    settings = quality_settings(tmp_path / "var")
    budget = duck.byte_count(settings.engine.memory_limit)
    db = duck.connect(settings, reserve=GX_RESERVE)
    try:
        (given,) = db.execute("SELECT current_setting('memory_limit')").fetchone() or ("",)
    finally:
        db.close()
    held = duck.resident_bytes()
    assert held > 0, "this process's memory is known"
    # DuckDB shows its limit in its own rounding (e.g. `1.1 GiB`).
    assert duck.byte_count(given) <= budget - GX_RESERVE - held // 2, (given, held)
    assert duck.byte_count(given) >= duck.MIN_DUCKDB_BYTES


def test_a_run_never_opens_root_state_partitions_settled_before_its_window(
    tmp_path: Path,
) -> None:
    """The checks read `root_state`'s unsettled roots wherever they sit in time, and the
    rest only from the window's first day: the settled history is never opened, so a run's
    cost follows its window, not the ledger's age. Shown by deleting those files: a run
    that opened one would fail."""
    from datetime import timedelta

    from ackfold.ledger.schema import status
    from ackfold.ledger.schema.tables import ROOT_STATE

    var = tmp_path / "var"
    ledger = faulty_ledger(var / "warehouse", faults=False)
    settings = quality_settings(var)
    path = Ledger(settings.table_root).path(ROOT_STATE)
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    settled = [a["path"] for a in actions if a["partition.status"] not in status.UNSETTLED]
    assert settled, "the ledger has settled roots"
    for name in settled:
        (Path(path) / name).unlink()

    report = run_quality(settings, now=ledger.late + timedelta(days=30))
    assert report.apps == (APP,)
    assert caught(report) == {}
