"""The one place a Spark session is made: Delta configured, quiet, sized for small machines.

Example:
    >>> from ackfold.spark import get_spark
    >>> spark = get_spark()  # local[*] unless ACKFOLD_SPARK__MASTER says otherwise
    >>> spark.range(3).count()
    3
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from ackfold.config import Settings, load_settings
from ackfold.jvm import bundle_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # delta-rs reads the ledger for the CLI and UI: keep tables at reader version 1.
    "spark.databricks.delta.properties.defaults.enableDeletionVectors": "false",
}


def spark_conf(settings: Settings, *, with_jars: bool = True) -> dict[str, str]:
    """Every Spark setting ackfold needs, for a session builder or `spark-submit --conf`.

    `settings.spark.conf` is applied last, so a user can override any of them.
    """
    conf = {
        **DELTA_CONF,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
        # Delta reads its log with this many tasks (default 50): too many for small machines.
        "spark.databricks.delta.snapshotPartitions": str(settings.spark.shuffle_partitions),
        # VACUUM lists a table's files with this many tasks (default 10,000): 18 s for a
        # tiny table on 2 cores, 2.5 s with a handful.
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": str(
            settings.spark.shuffle_partitions
        ),
        "spark.driver.memory": settings.spark.driver_memory,
        "spark.ui.enabled": str(settings.spark.ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": f"{settings.table_root}/_spark_catalog",
    }
    if with_jars:
        conf["spark.jars"] = ",".join(spark_jars(settings))
    if settings.spark.master.startswith("local"):
        # Python workers run here: use this interpreter, which has ackfold installed.
        conf["spark.pyspark.python"] = sys.executable
    conf.update(settings.spark.conf)
    return conf


def spark_jars(settings: Settings) -> list[str]:
    """The jars Spark needs beyond its own (Delta), verified in the local cache."""
    return [str(p) for p in bundle_jars("delta", settings.jars_dir)]  # type: ignore[arg-type]


def get_spark(settings: Settings | None = None, app_name: str = "ackfold") -> SparkSession:
    """Get or create the Spark session for `settings` (loaded from the environment if None).

    Under `spark-submit` pass the same `spark_conf()` and jars on the command line, as
    `ackfold.dags.spark_submit_kwargs()` does: the driver's classpath is fixed by then.
    """
    from pyspark.sql import SparkSession

    settings = settings or load_settings()
    builder = SparkSession.builder.appName(app_name)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    conf = spark_conf(settings, with_jars=not submitted)
    if not submitted:
        # Under spark-submit the master and the jars were chosen on its command line.
        builder = builder.master(settings.spark.master)
        if settings.spark.master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, no warning
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
