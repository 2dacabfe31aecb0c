"""`ackfold reconcile`, `ackfold replay` and `ackfold maintain` take their turn with the
DAGs' runs on other hosts: while another process holds the ledger's lease they say for
whom they wait, and after `--wait` seconds exit 1 naming it, before a JVM starts."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from ackfold import spark as spark_module
from ackfold.cli import main as cli_module
from ackfold.ledger.commits.lease import LedgerLease
from tests.ledger_fixtures import sample_ledger
from tests.unit.test_ledger_lease import holding


@pytest.fixture(autouse=True)
def no_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the command started Spark without its turn")

    monkeypatch.setattr(spark_module, "get_spark", refuse)


@pytest.mark.parametrize("command", [["reconcile"], ["replay", "--app", "orders"], ["maintain"]])
def test_a_command_waits_for_a_run_on_another_host_then_refuses(
    command: list[str],
    clean_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    warehouse = tmp_path / "warehouse"
    sample_ledger(warehouse)
    monkeypatch.setenv("ACKFOLD_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    other = holding(warehouse)  # e.g. the reconcile DAG's task on another worker
    try:
        started = time.monotonic()
        code = cli_module.run([*command, "--wait", "1"])
        waited = time.monotonic() - started
    finally:
        other.send_signal(signal.SIGINT)  # it gives the lease back on its way out
        other.wait()
    out, err = capsys.readouterr()
    assert code == 1
    assert waited >= 1
    assert out == ""
    first, last = err.strip().splitlines()
    assert first.startswith("ackfold: waiting for reconcile run 7 on ")
    assert "to release the ledger lease" in first
    assert "the ledger is busy: reconcile run 7 on " in last
    assert "Traceback" not in err
    assert LedgerLease(str(warehouse)).holder() is None


def test_a_bad_wait_is_a_usage_error(clean_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        cli_module.run(["reconcile", "--wait", "-5"])
    assert raised.value.code == 2
    assert "'-5' is not a number of seconds from 0 to 86400" in capsys.readouterr().err
