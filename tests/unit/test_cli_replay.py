"""`ackfold replay`: every bad request ends in one clear message and a non-zero exit, before
a JVM starts (the Spark and SQS side is tested in tests/sqs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ackfold import spark as spark_module
from ackfold.cli import main as cli_module
from ackfold.ledger.schema.values import hex64
from ackfold.replay.request import ReplayRequest
from tests.ledger_fixtures import Sample, sample_ledger
from tests.unit.test_cli_read import Run


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return sample_ledger(tmp_path_factory.mktemp("replay-ledger") / "warehouse")


@pytest.fixture
def replay(
    clean_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sample: Sample,
    tmp_path: Path,
) -> Callable[..., Run]:
    """`ackfold replay ARGS` in this process, failing the test if it starts Spark."""

    def no_jvm(*args: object, **kwargs: object) -> None:
        raise AssertionError("this request should have been refused before starting Spark")

    monkeypatch.setattr(spark_module, "get_spark", no_jvm)

    def run(*args: str, warehouse: str | None = None) -> Run:
        monkeypatch.setenv("ACKFOLD_WAREHOUSE", warehouse or sample.warehouse)
        monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path))
        code = cli_module.run(["replay", *args])
        out, err = capsys.readouterr()
        return Run(("replay", *args), code, out, err)

    return run


def _error(run: Run, code: int) -> str:
    assert run.code == code, (run.args, run.code, run.out, run.err)
    assert run.out == ""
    assert "Traceback" not in run.err
    lines = run.err.splitlines()
    assert len(lines) == 1, run.err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "-5"], "--rate must be from 0.1 to 100,000 messages per second, got -5"),
        (["--rate", "0"], "--rate must be from 0.1 to 100,000 messages per second, got 0"),
        # A tiny rate would sleep for ever, holding the ledger lock; a huge one floods.
        (["--rate", "1e-320"], "--rate must be from 0.1 to 100,000 messages per second"),
        (["--rate", "1e6"], "--rate must be from 0.1 to 100,000 messages per second"),
        (["--rate", "fast"], "--rate 'fast' is not a number"),
        (["--limit", "-1"], "--limit must be from 1 to 10,000,000 roots, got -1"),
        (["--limit", "0"], "--limit"),
        # Past Spark's 32-bit limit: refused here, not by a Py4J error mid-plan.
        (["--limit", "3000000000"], "--limit must be from 1 to 10,000,000 roots, got 3000000000"),
        (["--since", "0001-01-01T00:00:00+01:00"], "--since '0001-01-01T00:00:00+01:00' is out"),
        (["--until", "9999-12-31"], "--until '9999-12-31' is out of range: give a time from 1970"),
        (["--since", "2026-11-22T10:00:00Z", "--until", "2026-11-22T09:00:00Z"], "must be before"),
        (["--since", "yesterday"], "--since"),
        (["--until", "2026-13-01"], "--until"),
        (["--status", "completed"], "cannot replay status completed"),
        (["--status", "bogus"], "bogus"),
        (["--root", "12xyz"], "12xyz"),
        (["--app", "../etc"], "is not an app name"),
        (["--auto", "--status", "failed"], "--auto follows each app's policy"),
    ],
)
def test_bad_parameters_are_refused_with_exit_2(
    replay: Callable[..., Run], args: list[str], message: str
) -> None:
    assert message in _error(replay(*args), 2)


def test_an_unknown_app_is_named_with_the_known_ones(replay: Callable[..., Run]) -> None:
    line = _error(replay("--app", "nope"), 1)
    assert "unknown app 'nope'" in line


def test_unknown_root_ids_are_listed(replay: Callable[..., Run], sample: Sample) -> None:
    line = _error(replay("--root", "123", str(sample.dead), "0x2a"), 1)
    assert line.endswith(f"unknown root id(s), not in root_state: {hex64(42)}, {hex64(123)}")


def test_without_a_ledger_it_says_how_to_make_one(
    replay: Callable[..., Run], tmp_path: Path
) -> None:
    line = _error(replay(warehouse=str(tmp_path / "nothing")), 1)
    assert "no ledger" in line


def test_the_request_is_logged_as_json_without_defaults() -> None:
    request = ReplayRequest(app="orders", limit=5, requested_by="cli:ana")
    assert request.describe() == (
        '{"app": "orders", "limit": 5, "statuses": ["failed", "timed_out"]}'
    )
