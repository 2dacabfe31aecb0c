"""`ackfold doctor` warns of every endpoint on this machine, naming its setting: the local
stack's endpoints, which a deployment must not keep. A warning does not fail the check."""

from __future__ import annotations

from pathlib import Path

import pytest

from ackfold.cli import main as cli

pytestmark = pytest.mark.usefixtures("clean_env")


def _doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = cli.run(["doctor", "--no-probe", *args])
    out = capsys.readouterr().out
    return code, [line for line in out.splitlines() if line.startswith("warning: ")]


def test_production_defaults_give_no_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    code, warnings = _doctor(capsys)
    assert code == 0
    assert warnings == []


def test_each_loopback_endpoint_is_a_warning_naming_its_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("ACKFOLD_SQS__ENDPOINT_URL", "http://127.0.0.1:9324")
    monkeypatch.setenv("ACKFOLD_KAFKA__BOOTSTRAP_SERVERS", "broker.example.com:9092,[::1]:9092")
    monkeypatch.setenv("ACKFOLD_SPARK__REMOTE", "sc://localhost:15002/;token=secret")
    code, warnings = _doctor(capsys)
    assert code == 0  # a warning, not a refusal
    assert len(warnings) == 3, warnings
    sqs, kafka, remote = warnings
    assert "sqs.endpoint_url (ACKFOLD_SQS__ENDPOINT_URL) is http://127.0.0.1:9324" in sqs
    assert "unset it (ACKFOLD_SQS__ENDPOINT_URL=) for AWS" in sqs
    assert "kafka.bootstrap_servers (ACKFOLD_KAFKA__BOOTSTRAP_SERVERS)" in kafka
    assert "spark.remote (ACKFOLD_SPARK__REMOTE)" in remote
    assert "secret" not in remote


def test_kafkas_default_brokers_count_once_an_app_reads_kafka(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("ACKFOLD_APPS__ORDERS", '{"source": "kafka", "source_queue": "orders"}')
    _, warnings = _doctor(capsys)
    assert [w for w in warnings if "kafka.bootstrap_servers" in w and "127.0.0.1:9092" in w]


def test_a_loopback_store_endpoint_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9020")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    _, warnings = _doctor(capsys, "--warehouse", "s3://bucket/warehouse")
    assert len(warnings) == 1, warnings
    assert "the warehouse's endpoint (AWS_ENDPOINT_URL) is http://127.0.0.1:9020" in warnings[0]
