"""The one way ackfold builds Kafka clients (confluent-kafka, settings from `kafka.*`), and
the admin calls it makes: which topics exist and their ids, checking them, creating them.

A broker that does not answer within `kafka.timeout` is a `SourceError` that says so and
names the setting.

Example:
    >>> create_topics(settings, ["wordcount-sentences"])             # doctest: +SKIP
    ['wordcount-sentences']
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ackfold.config import Settings
from ackfold.sources.base import SourceError
from ackfold.sources.kafka_security import client_security


def client_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    """confluent-kafka settings for `settings.kafka`, its security settings included
    (`ackfold.sources.kafka_security`); librdkafka logs to Python logging."""
    timeout_ms = int(settings.kafka.timeout.total_seconds() * 1000)
    return {
        "bootstrap.servers": settings.kafka.bootstrap_servers,
        "client.id": "ackfold",
        "socket.timeout.ms": timeout_ms,
        "logger": logging.getLogger("ackfold.kafka.client"),
        **client_security(settings),
        **extra,
    }


def timeout_seconds(settings: Settings) -> float:
    """`kafka.timeout` in seconds: how long a request to the brokers may take."""
    return settings.kafka.timeout.total_seconds()


def unreachable(settings: Settings, error: object) -> SourceError:
    """The error of brokers that did not answer (`error`: what the client said), or that
    refused the login or the TLS handshake (asked again here: librdkafka reports those
    as a transport failure)."""
    servers = settings.kafka.bootstrap_servers
    refused = _refusal(settings)
    if refused is not None and refused[0] == "login":
        return SourceError(
            f"Kafka at {servers} refused the login ({refused[1]}): check "
            "kafka.security_protocol, kafka.sasl_mechanism, kafka.sasl_username and "
            "kafka.sasl_password (ACKFOLD_KAFKA__SASL_USERNAME, ACKFOLD_KAFKA__SASL_PASSWORD)"
        )
    if refused is not None:
        return SourceError(
            f"Kafka at {servers} failed the TLS handshake ({refused[1]}): check "
            "kafka.security_protocol and kafka.ssl_ca_location (ACKFOLD_KAFKA__SSL_CA_LOCATION)"
        )
    return SourceError(
        f"Kafka at {servers} did not answer within "
        f"{timeout_seconds(settings):g} s ({error}): is the broker up? (kafka.bootstrap_servers)"
    )


def _refusal(settings: Settings) -> tuple[str, str] | None:
    """("login" or "tls", what librdkafka said) if the brokers refuse ackfold's SASL login
    or TLS handshake, by one more metadata request; None for PLAINTEXT."""
    if settings.kafka.security_protocol == "PLAINTEXT":
        return None
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    kinds = {KafkaError._AUTHENTICATION: "login", KafkaError._SSL: "tls"}
    seen: list[tuple[str, str]] = []

    def note(error: Any) -> None:
        if error.code() in kinds:
            seen.append((kinds[error.code()], error.str()))

    admin = AdminClient(client_config(settings, error_cb=note))
    try:
        admin.list_topics(timeout=min(2.0, timeout_seconds(settings)))
    except KafkaException:
        admin.poll(0)  # error events are served here, not during the request
    return seen[0] if seen else None


def existing_topics(settings: Settings, admin: Any = None) -> set[str]:
    """The topics the brokers have; `SourceError` if they do not answer."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = admin or AdminClient(client_config(settings))
    try:
        metadata = admin.list_topics(timeout=timeout_seconds(settings))
    except KafkaException as exc:
        raise unreachable(settings, exc.args[0]) from None
    return set(metadata.topics)


def topic_ids(settings: Settings, topics: Iterable[str], admin: Any = None) -> dict[str, str]:
    """Each topic's id (Kafka's topic UUID, as text): a topic deleted and created again
    under the same name gets a new one. `SourceError` if the brokers do not answer, or if
    a topic is still unknown after `kafka.timeout`.

    A topic created a moment ago may be unknown to the broker that answers until the
    cluster's metadata reaches it: a spout that starts right after its topics were created
    (the demo creates its own) waits for them, up to `kafka.timeout`, rather than fail."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    wanted = sorted(set(topics))
    admin = admin or AdminClient(client_config(settings))
    deadline = time.monotonic() + timeout_seconds(settings)
    pause = 0.05
    found: dict[str, str] = {}
    while wanted:
        futures = admin.describe_topics(
            TopicCollection(wanted), request_timeout=timeout_seconds(settings)
        )
        unknown = []
        for name, future in futures.items():
            try:
                found[name] = str(future.result().topic_id)
            except KafkaException as exc:
                if "UNKNOWN_TOPIC" not in str(exc):
                    raise unreachable(settings, exc.args[0]) from None
                unknown.append(name)
        wanted = sorted(unknown)
        if wanted and time.monotonic() + pause > deadline:
            raise SourceError(
                f"Kafka topic(s) {', '.join(wanted)} do not exist at "
                f"{settings.kafka.bootstrap_servers} (still unknown after "
                f"{timeout_seconds(settings):g} s, kafka.timeout): create them, or correct "
                "the setting that names them"
            )
        if wanted:
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
    return found


def check_topics(settings: Settings, topics: Mapping[str, str]) -> None:
    """Raise `SourceError` naming every topic (and the setting that names it) that the
    brokers do not have: Spark would wait on a missing topic without a word.

    `topics` maps each topic to the setting it comes from."""
    have = existing_topics(settings)
    missing = [f"{topic} ({setting})" for topic, setting in topics.items() if topic not in have]
    if missing:
        raise SourceError(
            f"Kafka topic(s) {', '.join(missing)} do not exist at "
            f"{settings.kafka.bootstrap_servers}: create them (kafka-topics.sh --create), "
            "or correct the setting"
        )


def create_topics(settings: Settings, topics: Iterable[str]) -> list[str]:
    """Create the topics that do not exist yet (`kafka.partitions` each, replication 1:
    for the local broker and the demo). Returns the ones created."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient(client_config(settings))
    new = sorted(set(topics) - existing_topics(settings, admin))
    if not new:
        return []
    futures = admin.create_topics(
        [NewTopic(name, settings.kafka.partitions, 1) for name in new],
        request_timeout=timeout_seconds(settings),
    )
    for name, future in futures.items():
        try:
            future.result()
        except Exception as exc:  # a KafkaException, or a timeout
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise SourceError(f"could not create Kafka topic {name}: {exc}") from None
    # Created is not yet known everywhere: back only once the brokers describe them, so
    # that whatever runs next (an app's start-up check, a spout) finds them.
    topic_ids(settings, new, admin)
    return new
