from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ackfold.config import Settings, load_settings
from ackfold.spark import get_spark
from tests.conftest import JARS_DIR


@pytest.fixture(scope="session")
def spark_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    var = tmp_path_factory.mktemp("spark-var")
    return load_settings(var_dir=var, jars_dir=JARS_DIR, spark={"master": "local[2]"})


@pytest.fixture(scope="session")
def spark(spark_settings: Settings) -> Iterator[SparkSession]:
    """One JVM for the whole Spark tier: starting one costs seconds. Stopped with its JVM
    at the end, so a run without xdist workers leaves no process behind either."""
    from pyspark import SparkContext

    session = get_spark(spark_settings, app_name="ackfold-tests")
    yield session
    session.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        gateway.proc.stdin.close()  # the JVM exits when its parent's pipe closes
        gateway.proc.wait(timeout=60)
        SparkContext._gateway = None


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    return str(tmp_path / "table")
