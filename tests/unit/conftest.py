"""Fixtures of the unit tier: the real SMTP, webhook and connections of the alert tests."""

from tests.alert_fixtures import connections, smtp, webhook  # noqa: F401 (fixtures)
