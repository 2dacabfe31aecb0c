"""The local stack sets its own endpoints: ackfold's defaults are production's, and
`ackfold up`, `ackfold demo` and `ackfold sqs` point SQS at the local ElasticMQ unless the
configuration names an endpoint, or unsets it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ackfold.config import load_settings
from ackfold_dev.local_endpoints import LOCAL_SQS, SQS_ENDPOINT_ENV, with_local_endpoints

pytestmark = pytest.mark.usefixtures("clean_env")


def test_unset_the_stack_points_sqs_at_elasticmq_and_tells_its_processes() -> None:
    environ: dict[str, str] = {}
    settings = load_settings()
    assert settings.sqs.endpoint_url is None, "production's default: AWS's endpoint"
    local = with_local_endpoints(settings, environ)
    assert local.sqs.endpoint_url == LOCAL_SQS == "http://127.0.0.1:9324"
    # Airflow's components, the demo and spark-submit inherit it.
    assert environ == {SQS_ENDPOINT_ENV: LOCAL_SQS}


@pytest.mark.parametrize(
    "endpoint", ["http://127.0.0.1:9400", "https://sqs.eu-west-1.amazonaws.com"]
)
def test_an_endpoint_the_configuration_names_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: str
) -> None:
    config = tmp_path / "ackfold.yaml"
    config.write_text(f"sqs:\n  endpoint_url: {endpoint}\n")
    monkeypatch.setenv("ACKFOLD_CONFIG", str(config))
    environ: dict[str, str] = {}
    assert with_local_endpoints(load_settings(), environ).sqs.endpoint_url == endpoint
    assert environ == {}


def test_an_endpoint_unset_on_purpose_stays_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SQS_ENDPOINT_ENV, "")
    environ = {SQS_ENDPOINT_ENV: ""}
    assert with_local_endpoints(load_settings(), environ).sqs.endpoint_url is None
    assert environ == {SQS_ENDPOINT_ENV: ""}
