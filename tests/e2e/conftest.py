"""The e2e tier: real ElasticMQ and Kafka, real Spark and Delta, the whole product at once."""

from tests.kafka.conftest import kafka_broker  # noqa: F401
from tests.sqs.conftest import sqs_server  # noqa: F401
