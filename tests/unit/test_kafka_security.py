"""Kafka security settings as client options: confluent-kafka's and Spark's Kafka source's
(`ackfold.sources.kafka_security`), where the password comes from, and that it is never
shown. `tests/kafka/test_security.py` talks to a real broker with SASL/PLAIN."""

from __future__ import annotations

import doctest
import json
import re
from pathlib import Path

import pytest

from ackfold.airflow.connections import kafka_credential_env
from ackfold.airflow.spark_jobs import spark_submit_kwargs
from ackfold.config import ConfigError, Settings, load_settings
from ackfold.sources import kafka_security
from ackfold.sources.kafka_client import client_config
from ackfold.sources.kafka_security import KafkaSecurityError, client_security, spark_security

PASSWORD = 'pa"ss\\word-7'  # a quote and a backslash: the JAAS string must escape both


def kafka(**values: object) -> Settings:
    return load_settings(kafka=values)


def test_docstring_examples_run() -> None:
    result = doctest.testmod(kafka_security)
    assert result.attempted > 0
    assert result.failed == 0


def test_plaintext_adds_no_option() -> None:
    settings = kafka()
    assert client_security(settings) == {}
    assert spark_security(settings) == {}
    assert not any(k.startswith(("security.", "sasl.", "ssl.")) for k in client_config(settings))


def test_sasl_ssl_with_scram_and_a_ca_file_maps_to_both_clients(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    settings = kafka(
        security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="ackfold",
        sasl_password=PASSWORD, ssl_ca_location=str(ca),
    )  # fmt: skip
    assert client_security(settings) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "ackfold",
        "sasl.password": PASSWORD,
        "ssl.ca.location": str(ca),
    }
    assert spark_security(settings) == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="ackfold" password="pa\\"ss\\\\word-7";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca),
    }
    config = client_config(settings, **{"group.id": "g"})
    assert config["sasl.password"] == PASSWORD
    assert config["group.id"] == "g"


def test_tls_without_sasl_needs_only_the_ca(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    settings = kafka(security_protocol="SSL", ssl_ca_location=str(ca))
    assert client_security(settings) == {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    assert spark_security(settings)["kafka.ssl.truststore.location"] == str(ca)


def test_the_password_comes_from_the_environment_and_is_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACKFOLD_KAFKA__SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("ACKFOLD_KAFKA__SASL_MECHANISM", "PLAIN")
    monkeypatch.setenv("ACKFOLD_KAFKA__SASL_USERNAME", "ackfold")
    monkeypatch.setenv("ACKFOLD_KAFKA__SASL_PASSWORD", PASSWORD)
    settings = load_settings()
    assert client_security(settings)["sasl.password"] == PASSWORD
    # What `ackfold config` prints, and what a log line or traceback would show.
    for shown in (json.dumps(settings.model_dump(mode="json")), repr(settings), str(settings)):
        assert PASSWORD not in shown
    assert settings.model_dump(mode="json")["kafka"]["sasl_password"] == "**********"


def test_missing_credentials_or_ca_name_the_setting_and_how_to_fix_it(tmp_path: Path) -> None:
    settings = kafka(security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u")
    with pytest.raises(KafkaSecurityError) as raised:
        client_security(settings)
    assert str(raised.value) == (
        "kafka.security_protocol SASL_SSL with PLAIN needs kafka.sasl_username and "
        "kafka.sasl_password: set ACKFOLD_KAFKA__SASL_USERNAME and "
        "ACKFOLD_KAFKA__SASL_PASSWORD in the environment"
    )
    via_airflow = kafka(
        security_protocol="SASL_SSL", sasl_mechanism="PLAIN", airflow_connection="kafka_prod"
    )
    with pytest.raises(KafkaSecurityError, match="or the login and password of the Airflow "):
        spark_security(via_airflow)
    missing = tmp_path / "nope.pem"
    with pytest.raises(KafkaSecurityError, match=r"kafka.ssl_ca_location names .*nope.pem"):
        client_security(kafka(security_protocol="SSL", ssl_ca_location=str(missing)))


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"security_protocol": "SASL_SSL"}, "needs sasl_mechanism"),
        ({"sasl_username": "u"}, "sasl_* settings need a SASL security_protocol"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
          "ssl_ca_location": "/ca.pem"}, "ssl_ca_location needs an SSL security_protocol"),
        ({"security_protocol": "TLS"}, "security_protocol"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"}, "sasl_mechanism"),
    ],
)  # fmt: skip
def test_inconsistent_security_settings_are_refused_at_load(
    values: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        kafka(**values)


def test_the_dags_hand_spark_submit_the_airflow_connections_login_as_templates() -> None:
    assert kafka_credential_env(kafka()) == {}
    settings = kafka(
        security_protocol="SASL_SSL", sasl_mechanism="PLAIN", airflow_connection="kafka_prod"
    )
    env = spark_submit_kwargs("replay.py", settings)["env_vars"]
    assert env == {
        "ACKFOLD_KAFKA__SASL_USERNAME": "{{ conn['kafka_prod'].login }}",
        "ACKFOLD_KAFKA__SASL_PASSWORD": "{{ conn['kafka_prod'].password }}",
    }
