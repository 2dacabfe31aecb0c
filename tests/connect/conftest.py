"""The connect tier: one local Spark Connect server with Delta (`ackfold_dev.connect`)
for the whole run, shared by every worker; the tests' sessions are Connect clients, with
no JVM on this side."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ackfold.config import Settings, load_settings
from ackfold.spark import get_spark
from ackfold_dev.connect import LocalConnectServer
from ackfold_dev.ports import free_port
from tests.conftest import JARS_DIR, long_lived_jvm
from tests.suite import shared_server


@pytest.fixture(scope="session")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The sc:// URL of the run's Spark Connect server (started by the first worker)."""

    def start() -> dict[str, Any]:
        settings = load_settings(
            var_dir=tmp_path_factory.mktemp("connect-server"),
            jars_dir=JARS_DIR,
            spark={"master": "local[2]"},
        )
        server = LocalConnectServer(settings, port=free_port())
        with long_lived_jvm():
            server.start()
        return {"url": server.url, "pgid": server.pid}

    return str(shared_server("connect", start)["url"])


@pytest.fixture(scope="session")
def connect_settings(connect_url: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return load_settings(
        var_dir=tmp_path_factory.mktemp("connect-var"),
        jars_dir=JARS_DIR,
        spark={"remote": connect_url},
    )


@pytest.fixture(scope="package")
def spark(connect_settings: Settings) -> Iterator[SparkSession]:
    """A Spark Connect session: what a tracked app gets from `get_spark` with
    `spark.remote` set. Tests written for the classic tier run on it unchanged.

    PySpark builds Connect expressions while SPARK_CONNECT_MODE_ENABLED is set: it goes
    with the session, so that a classic tier this worker runs next builds classic ones."""
    session = get_spark(connect_settings, app_name="ackfold-connect-tests")
    yield session
    session.stop()
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    return str(tmp_path / "table")


from tests.sqs.conftest import sqs_server  # noqa: E402, F401
