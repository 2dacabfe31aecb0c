import os
import re
from datetime import timedelta
from pathlib import Path

import botocore
import pytest

from ackfold.config import ConfigError, load_settings
from ackfold.sources.base import SourceError
from ackfold.sources.sqs import SqsQueue
from ackfold.sources.sqs_client import is_loopback, sqs_client
from tests.conftest import PROJECT_DIR

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """boto3's chain finds nothing: no AWS_* variable, empty config files, no metadata."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        empty = tmp_path / name.lower()
        empty.write_text("")
        monkeypatch.setenv(name, str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_sqs_defaults() -> None:
    sqs = load_settings().sqs
    assert sqs.max_retries == 5
    assert sqs.wait_time == timedelta(seconds=5)
    assert sqs.visibility_timeout == timedelta(seconds=120)
    assert sqs.max_messages_per_batch == 1000


def test_sqs_durations_take_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACKFOLD_SQS__WAIT_TIME", "20s")
    monkeypatch.setenv("ACKFOLD_SQS__VISIBILITY_TIMEOUT", "12h")
    sqs = load_settings().sqs
    assert (sqs.wait_time, sqs.visibility_timeout) == (timedelta(seconds=20), timedelta(hours=12))


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("MAX_RETRIES", "0", "greater than or equal to 1"),
        ("MAX_RETRIES", "21", "less than or equal to 20"),
        ("WAIT_TIME", "21s", "from 1s to 20s (the SQS limit), not 21s"),
        ("WAIT_TIME", "0", "must be positive"),
        ("WAIT_TIME", "1.5s", "whole number of seconds"),
        ("VISIBILITY_TIMEOUT", "13h", "from 1s to 12h"),
        ("VISIBILITY_TIMEOUT", "500ms", "whole number of seconds"),
        ("VISIBILITY_TIMEOUT", "5s", "5s must exceed sqs.wait_time (5s)"),
        ("MAX_MESSAGES_PER_BATCH", "9", "greater than or equal to 10"),
        ("MAX_MESSAGES_PER_BATCH", "100001", "less than or equal to 100000"),
    ],
)
def test_bad_sqs_values_name_the_setting(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, message: str
) -> None:
    monkeypatch.setenv(f"ACKFOLD_SQS__{env}", value)
    named = f"setting sqs.{env.lower()} (environment ACKFOLD_SQS__{env}): "
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert named in str(caught.value)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:9324", True),
        ("http://127.8.0.1:9324", True),
        ("http://localhost:9324", True),
        ("http://[::1]:9324", True),
        ("https://sqs.us-east-1.amazonaws.com", False),
        ("http://10.0.0.5:9324", False),
        ("http://localhost.example.com", False),
        (None, False),
    ],
)
def test_is_loopback(url: str | None, loopback: bool) -> None:
    assert is_loopback(url) is loopback


@pytest.mark.usefixtures("no_credentials")
def test_loopback_without_credentials_is_unsigned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACKFOLD_SQS__ENDPOINT_URL", "http://127.0.0.1:9324")
    client = sqs_client(load_settings())
    assert client.meta.config.signature_version is botocore.UNSIGNED
    assert client.meta.endpoint_url == "http://127.0.0.1:9324"
    assert client.meta.region_name == "us-east-1"


@pytest.mark.usefixtures("no_credentials")
def test_loopback_with_credentials_from_the_chain_is_signed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    client = sqs_client(load_settings(sqs={"endpoint_url": "http://127.0.0.1:9324"}))
    assert client.meta.config.signature_version is not botocore.UNSIGNED


@pytest.mark.usefixtures("no_credentials")
def test_credentials_from_a_profile_file_are_used(tmp_path: Path) -> None:
    Path(os.environ["AWS_SHARED_CREDENTIALS_FILE"]).write_text(
        "[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = secret\n"
    )
    client = sqs_client(load_settings(sqs={"endpoint_url": "http://127.0.0.1:9324"}))
    assert client.meta.config.signature_version is not botocore.UNSIGNED


@pytest.mark.usefixtures("no_credentials")
def test_a_remote_endpoint_is_never_unsigned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACKFOLD_SQS__ENDPOINT_URL", "https://sqs.eu-west-1.amazonaws.com")
    monkeypatch.setenv("ACKFOLD_SQS__REGION", "eu-west-1")
    client = sqs_client(load_settings())
    assert client.meta.config.signature_version is not botocore.UNSIGNED
    assert client.meta.endpoint_url == "https://sqs.eu-west-1.amazonaws.com"


@pytest.mark.usefixtures("no_credentials")
def test_retries_and_timeouts_come_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACKFOLD_SQS__MAX_RETRIES", "7")
    monkeypatch.setenv("ACKFOLD_SQS__WAIT_TIME", "20s")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    config = sqs_client(load_settings()).meta.config
    # botocore's `max_attempts` counts retries: 7 retries are 8 attempts in all.
    assert config.retries == {"mode": "standard", "total_max_attempts": 8}
    # A long poll must end before the read times out.
    assert config.read_timeout > 20
    assert config.connect_timeout <= 10


def test_sqs_defaults_leave_endpoint_and_region_to_boto3() -> None:
    sqs = load_settings().sqs
    assert (sqs.endpoint_url, sqs.region) == (None, None)


@pytest.mark.usefixtures("no_credentials")
@pytest.mark.parametrize("variable", ["AWS_REGION", "AWS_DEFAULT_REGION"])
def test_the_region_comes_from_the_aws_chain(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "ap-southeast-2")
    client = sqs_client(load_settings())
    assert client.meta.region_name == "ap-southeast-2"
    assert client.meta.endpoint_url == "https://sqs.ap-southeast-2.amazonaws.com"


@pytest.mark.usefixtures("no_credentials")
def test_the_region_of_a_profile_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    Path(os.environ["AWS_CONFIG_FILE"]).write_text("[default]\nregion = sa-east-1\n")
    assert sqs_client(load_settings()).meta.region_name == "sa-east-1"


@pytest.mark.usefixtures("no_credentials")
def test_the_setting_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("ACKFOLD_SQS__REGION", "us-west-2")
    assert sqs_client(load_settings()).meta.region_name == "us-west-2"


@pytest.mark.usefixtures("no_credentials")
def test_an_empty_variable_unsets_the_files_endpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "ackfold.yaml"
    config.write_text("sqs:\n  endpoint_url: http://127.0.0.1:9324\n  region: us-west-2\n")
    monkeypatch.setenv("ACKFOLD_CONFIG", str(config))
    assert load_settings().sqs.endpoint_url == "http://127.0.0.1:9324"
    monkeypatch.setenv("ACKFOLD_SQS__ENDPOINT_URL", "")
    monkeypatch.setenv("ACKFOLD_SQS__REGION", "")
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    sqs = load_settings().sqs
    assert (sqs.endpoint_url, sqs.region) == (None, None)
    assert sqs_client(load_settings()).meta.endpoint_url == (
        "https://sqs.eu-central-1.amazonaws.com"
    )


@pytest.mark.usefixtures("no_credentials")
def test_no_region_anywhere_names_the_settings() -> None:
    with pytest.raises(SourceError, match=r"set AWS_REGION .*sqs\.region \(ACKFOLD_SQS__REGION\)"):
        sqs_client(load_settings())


def _mwaa_startup_script() -> dict[str, str]:
    """The variables the MWAA recipe's startup script exports."""
    page = (PROJECT_DIR / "docs" / "operations" / "mwaa.md").read_text()
    exports = dict(re.findall(r"^export (\w+)=(\S+)$", page, flags=re.MULTILINE))
    assert set(exports) == {"ACKFOLD_WAREHOUSE", "AWS_REGION"}, exports
    return exports


@pytest.mark.usefixtures("no_credentials")
def test_the_mwaa_recipe_sends_to_aws_regional_sqs(monkeypatch: pytest.MonkeyPatch) -> None:
    # The deployment as docs/operations/mwaa.md configures it, and nothing else.
    for name, value in _mwaa_startup_script().items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    region = os.environ["AWS_REGION"]
    # The client of the queue a replay sends to (`SqsQueue`, as `ackfold.replay` makes it).
    queue = SqsQueue(settings, "orders-in")
    for client in (sqs_client(settings), queue.client):
        assert client.meta.region_name == region
        assert client.meta.endpoint_url == f"https://sqs.{region}.amazonaws.com"
        assert not is_loopback(client.meta.endpoint_url)
    assert queue.endpoint == f"AWS SQS in {region}"


@pytest.mark.usefixtures("no_credentials")
def test_the_service_model_is_read_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each client used to read botocore's SQS model again (0.3 s a client: a replay makes
    one per queue, the soak thousands)."""
    from botocore.loaders import JSONFileLoader

    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    sqs_client(load_settings())  # the first one reads it
    reads: list[str] = []
    real = JSONFileLoader.load_file

    def counted(self: JSONFileLoader, file_path: str) -> object:
        reads.append(file_path)
        return real(self, file_path)

    monkeypatch.setattr(JSONFileLoader, "load_file", counted)
    client = sqs_client(load_settings())
    assert reads == []
    assert client.meta.service_model.service_name == "sqs"
