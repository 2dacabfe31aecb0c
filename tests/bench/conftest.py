"""The bench tier: bench/connect.py runs against the run's shared Spark Connect server."""

from tests.connect.conftest import connect_url  # noqa: F401
