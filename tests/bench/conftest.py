"""The bench tier: bench/connect.py runs against the run's shared Spark Connect server,
bench/soak.py against the run's shared ElasticMQ."""

from tests.connect.conftest import connect_url  # noqa: F401
from tests.sqs.conftest import sqs_server  # noqa: F401
