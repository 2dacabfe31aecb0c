"""What the CLI says when something goes wrong, with and without `--verbose`: an expected
error is one line on stderr, and `--verbose` (before or after the command) puts its
traceback before that line and shows ackfold's INFO log lines; Ctrl-C is one line too; a
bug keeps its traceback. No JVM: the errors come before any Spark session."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ackfold.cli import main as cli
from ackfold.config import load_settings


@pytest.fixture(autouse=True)
def _fresh_var_dir(clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))


LIMIT = "ackfold: --limit must be from 1 to 10,000,000 roots, got -1"


def test_an_expected_error_is_one_line_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.run(["roots", "--limit", "-1"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.splitlines() == [LIMIT]


@pytest.mark.parametrize(
    "argv",
    [["roots", "--limit", "-1", "--verbose"], ["-v", "roots", "--limit", "-1"]],
    ids=["after the command", "before it"],
)
def test_verbose_puts_the_traceback_before_the_same_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.run(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "Traceback (most recent call last):"
    assert err[-1] == LIMIT
    # And the next run, without it, is quiet again.
    assert cli.run(["roots", "--limit", "-1"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.splitlines() == [LIMIT]


def test_a_ledger_error_is_one_line_and_verbose_adds_its_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.run(["roots"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ackfold: no ledger at ")
    assert cli.run(["roots", "-v"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert "ackfold.ledger.errors.NoLedger" in err
    assert err.splitlines()[-1] == line


def test_verbose_shows_ackfolds_info_log_lines(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def settings_that_log() -> object:
        logging.getLogger("ackfold.reconcile").info("folded 3 event(s)")
        return load_settings()

    monkeypatch.setattr(cli, "load_settings", settings_that_log)
    caplog.set_level(logging.INFO)  # the root logger at INFO, as Airflow's own set-up leaves it
    assert cli.run(["config"]) == 0
    assert "folded 3 event(s)" not in caplog.text
    assert cli.run(["config", "--verbose"]) == 0
    assert "folded 3 event(s)" in caplog.text
    assert logging.getLogger("ackfold").level == logging.NOTSET  # restored after the run


def test_ctrl_c_is_one_line_and_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "load_settings", interrupted)
    assert cli.run(["config"]) == 130
    assert capsys.readouterr().err.splitlines() == ["ackfold: interrupted"]


def test_a_bug_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cli, "load_settings", broken)
    with pytest.raises(ZeroDivisionError, match="a bug"):
        cli.run(["config"])


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ("ackfold.ledger.errors.SchemaMismatch", 1),
        ("ackfold.ledger.errors.UnreadableFiles", 1),
        ("ackfold.ledger.errors.LeaseLost", 1),
        ("ackfold.errors.AckfoldError", 1),
        ("ackfold.config.ConfigError", cli.EXIT_USAGE),
    ],
)
def test_every_ackfold_error_is_one_line_with_its_exit_code(
    error: str, code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any `AckfoldError` a command raises, not only the ones the CLI names, is one line
    (its traceback with --verbose); usage errors keep exit code 2."""
    import importlib

    module, name = error.rsplit(".", 1)
    kind = getattr(importlib.import_module(module), name)

    def refused() -> None:
        raise kind("root_state: what is wrong, and the fix")

    monkeypatch.setattr(cli, "load_settings", refused)
    assert cli.run(["config"]) == code
    assert capsys.readouterr().err.splitlines() == [
        "ackfold: root_state: what is wrong, and the fix"
    ]
    assert cli.run(["config", "-v"]) == code
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "Traceback (most recent call last):"
    assert err[-1] == "ackfold: root_state: what is wrong, and the fix"
