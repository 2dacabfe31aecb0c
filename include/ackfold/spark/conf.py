"""Every Spark setting ackfold needs (Delta, time zone, sizes for small machines, the
jars, the workers' Python, a quiet log), for a session builder or `spark-submit --conf`."""

from __future__ import annotations

import logging
from pathlib import Path

from ackfold.config import Settings
from ackfold.ledger.storage.protocol import refuse_unsafe_log_store
from ackfold.ledger.storage.store import store_kind
from ackfold.spark.jars import BASE_BUNDLES, BUNDLES, bundle_jars, resolve, store_bundle
from ackfold.spark.python import worker_python

log = logging.getLogger(__name__)

# Spark's own log lines in a console session (the CLI, the demo): errors only, so that a
# user sees ackfold's lines and real errors, not Spark's warnings (the native-hadoop notice
# at start, AQE "not supported in streaming" at every query start, ...). A log4j2 file, not
# setLogLevel: the first warnings come while the JVM starts, before a session exists.
QUIET_LOG_CONFIG = Path(__file__).with_name("quiet-log4j2.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
GCS_FILE_SYSTEM = "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"
GCS_ABSTRACT_FS = "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFS"

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
        # Spark keeps 100 generated classes (a static setting): a tracked app's split, its
        # ledger jobs, the count and its MERGE push each other's out, so every micro-batch
        # compiles some again (tests/spark/test_stage_costs.py counts the compiles).
        "spark.sql.codegen.cache.maxEntries": "2000",
        "spark.sql.warehouse.dir": f"{settings.table_root}/_spark_catalog",
    }
    if with_jars:
        conf["spark.jars"] = ",".join(spark_jars(settings))
    python = worker_python(settings)
    if python is not None:
        conf["spark.pyspark.python"] = python
    if store_kind(settings.table_root) == "gcs":
        # Hadoop names S3A and ABFS in its defaults, not the GCS connector: its file system
        # and FileContext's (streaming checkpoints), which a jar of `spark.jars` cannot
        # register by itself (Hadoop looks on the JVM's class path).
        conf["spark.hadoop.fs.gs.impl"] = GCS_FILE_SYSTEM
        conf["spark.hadoop.fs.AbstractFileSystem.gs.impl"] = GCS_ABSTRACT_FS
    conf.update(settings.spark.conf)
    refuse_unsafe_log_store(settings.table_root, conf)
    return conf


def spark_jars(settings: Settings) -> list[str]:
    """The jars Spark needs beyond its own (Delta, the Kafka source, and the Hadoop
    connector of the warehouse's object store), verified in the local cache. The
    connector is resolved from Maven Central on demand, the first time a session starts
    for a warehouse on its store."""
    assert settings.jars_dir is not None
    jars = [
        str(path)
        for name in BASE_BUNDLES
        if BUNDLES[name].for_spark
        for path in bundle_jars(name, settings.jars_dir)
    ]
    connector = store_bundle(settings.table_root)
    if connector is not None:
        jars += [str(path) for path in resolve(connector, settings.jars_dir, log.info)]
    return jars


def quiet_conf(conf: dict[str, str]) -> dict[str, str]:
    """`conf` with the driver JVM started on `QUIET_LOG_CONFIG`: Spark logs errors only.

    A `-Dlog4j2.configurationFile` of the user's own (in `spark.conf`) comes after ours in
    the options, and so wins.

    Example:
        >>> options = quiet_conf({DRIVER_JAVA_OPTIONS: "-Xss4m"})[DRIVER_JAVA_OPTIONS]
        >>> options.startswith("-Dlog4j2.configurationFile=file:"), options.endswith(" -Xss4m")
        (True, True)
    """
    ours = f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG.as_uri()}"
    theirs = conf.get(DRIVER_JAVA_OPTIONS, "")
    return {**conf, DRIVER_JAVA_OPTIONS: f"{ours} {theirs}".strip()}
