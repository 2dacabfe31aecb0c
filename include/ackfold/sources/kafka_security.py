"""How ackfold's Kafka clients authenticate and encrypt: `kafka.security_protocol`, the
`kafka.sasl_*` settings and `kafka.ssl_ca_location`, as options of the two kinds of
client: confluent-kafka (librdkafka: replays, topic admin) and Spark's Kafka source (the
Java client, options prefixed `kafka.`).

- `security_protocol`: `security.protocol`; Spark: `kafka.security.protocol`.
- `sasl_mechanism`: `sasl.mechanism`; Spark: `kafka.sasl.mechanism`.
- `sasl_username`, `sasl_password`: `sasl.username`, `sasl.password`; Spark:
  `kafka.sasl.jaas.config`, the mechanism's login module with both.
- `ssl_ca_location` (a PEM file): `ssl.ca.location`; Spark: `kafka.ssl.truststore.type`
  `PEM` and `kafka.ssl.truststore.location`.

The password is a `SecretStr` in the settings: it is read out only here, into the
options, which ackfold never logs (Spark redacts `sasl.jaas.config` in its own logs).

Example:
    >>> from ackfold.config import load_settings
    >>> settings = load_settings(kafka={"security_protocol": "SASL_PLAINTEXT",
    ...     "sasl_mechanism": "PLAIN", "sasl_username": "ackfold", "sasl_password": "s3cret"})
    >>> sorted(client_security(settings))
    ['sasl.mechanism', 'sasl.password', 'sasl.username', 'security.protocol']
    >>> spark_security(settings)["kafka.sasl.jaas.config"]  # doctest: +ELLIPSIS
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="ackfold" ...'
    >>> "s3cret" in repr(settings.kafka)
    False
"""

from __future__ import annotations

from typing import Final

from ackfold.config import Settings
from ackfold.sources.base import SourceError

# The Java client's login module of each SASL mechanism.
LOGIN_MODULES: Final = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class KafkaSecurityError(SourceError):
    """The Kafka security settings are incomplete, or name a file that is not there."""


def client_security(settings: Settings) -> dict[str, str]:
    """The confluent-kafka (librdkafka) options of the security settings; none for
    PLAINTEXT."""
    kafka = settings.kafka
    options: dict[str, str] = {}
    if kafka.security_protocol == "PLAINTEXT":
        return options
    options["security.protocol"] = kafka.security_protocol
    if kafka.sasl_mechanism is not None:
        username, password = _credentials(settings)
        options["sasl.mechanism"] = kafka.sasl_mechanism
        options["sasl.username"] = username
        options["sasl.password"] = password
    ca = _ca_file(settings)
    if ca is not None:
        options["ssl.ca.location"] = ca
    return options


def spark_security(settings: Settings) -> dict[str, str]:
    """The options of Spark's Kafka source for the security settings (`kafka.`-prefixed,
    passed to its Java consumer); none for PLAINTEXT."""
    kafka = settings.kafka
    options: dict[str, str] = {}
    if kafka.security_protocol == "PLAINTEXT":
        return options
    options["kafka.security.protocol"] = kafka.security_protocol
    if kafka.sasl_mechanism is not None:
        username, password = _credentials(settings)
        module = LOGIN_MODULES[kafka.sasl_mechanism]
        options["kafka.sasl.mechanism"] = kafka.sasl_mechanism
        options["kafka.sasl.jaas.config"] = (
            f'{module} required username="{_jaas(username)}" password="{_jaas(password)}";'
        )
    ca = _ca_file(settings)
    if ca is not None:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = ca
    return options


def _credentials(settings: Settings) -> tuple[str, str]:
    kafka = settings.kafka
    password = kafka.sasl_password.get_secret_value() if kafka.sasl_password else ""
    if not kafka.sasl_username or not password:
        where = (
            f", or the login and password of the Airflow connection {kafka.airflow_connection}"
            if kafka.airflow_connection
            else ""
        )
        raise KafkaSecurityError(
            f"kafka.security_protocol {kafka.security_protocol} with {kafka.sasl_mechanism} "
            "needs kafka.sasl_username and kafka.sasl_password: set ACKFOLD_KAFKA__SASL_USERNAME "
            f"and ACKFOLD_KAFKA__SASL_PASSWORD in the environment{where}"
        )
    return kafka.sasl_username, password


def _ca_file(settings: Settings) -> str | None:
    path = settings.kafka.ssl_ca_location
    if path is None:
        return None
    path = path.expanduser()
    if not path.is_file():
        raise KafkaSecurityError(
            f"kafka.ssl_ca_location names {path}, which is not a file: give the PEM file of "
            "the brokers' certificate authority (ACKFOLD_KAFKA__SSL_CA_LOCATION)"
        )
    return str(path.resolve())


def _jaas(value: str) -> str:
    """`value` as a quoted JAAS option value: backslashes and quotes escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"')
