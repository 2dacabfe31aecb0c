"""The embedded engine: the jobs Airflow runs, in the task's own process, with no JVM.

DuckDB computes; delta-rs reads the ledger's tables and commits what the jobs write. One
setting, `engine.kind`, chooses between this engine and Spark (`engine_for`); both give
the same statuses row for row (`tests/conformance`).

- `duck`: a DuckDB connection bounded by `engine.memory_limit`, with the functions the
  jobs share (Spark's `xxhash64` of a string, for the event hashes `root_state` keeps).
- `log`: what a Delta table gained since a version, read from its log: the files of the
  appends that a reconcile has not folded yet.
- `tables`: a ledger table as DuckDB reads it (parquet files, or an Arrow dataset that
  delta-rs opens), and Arrow rows committed back through delta-rs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from ackfold.ledger.store import store_kind

if TYPE_CHECKING:
    from ackfold.config import Settings

EMBEDDED: Final = "embedded"
SPARK: Final = "spark"


def engine_for(settings: Settings, *, refuse: bool = True) -> Literal["embedded", "spark"]:
    """The engine `settings` choose: `engine.kind`, with `auto` resolved by the warehouse.
    Spark is chosen only where its commits to the derived tables are put-if-absent; asked
    for elsewhere (S3 without Delta's DynamoDB log store, a shared file system) it is
    refused with `UnsafeSparkCommits` (`ackfold.ledger.protocol.unsafe_spark_commits`),
    unless `refuse` is False: a DAG built on a host that is not the worker's says which
    task to make, and the task's run refuses.

    Example:
        >>> from ackfold.config import load_settings
        >>> engine_for(load_settings(warehouse="/srv/warehouse"))
        'embedded'
        >>> engine_for(load_settings(warehouse="hdfs://nn/warehouse"))
        'spark'
        >>> engine_for(load_settings(warehouse="s3a://lake/warehouse"))
        'embedded'
        >>> engine_for(load_settings(warehouse="s3a://lake/warehouse", spark={"remote": "sc://h"}))
        'embedded'
        >>> engine_for(load_settings(warehouse="/srv/warehouse", engine={"kind": "spark"}))
        'spark'
    """
    from ackfold.ledger.protocol import refuse_unsafe_spark_engine, unsafe_spark_commits

    kind = settings.engine.kind
    if kind == SPARK:
        if refuse:
            refuse_unsafe_spark_engine(settings)
        return SPARK
    if kind != "auto":
        return kind
    # delta-rs commits to a local disk and every object store: all but `other` (HDFS, ...).
    if store_kind(settings.table_root) == "other":
        return SPARK
    # A team that runs its jobs on a Spark Connect server keeps them there, where Spark
    # may commit the derived tables; elsewhere (S3, a shared file system) the embedded.
    if (
        settings.spark.remote
        and unsafe_spark_commits(settings.table_root, settings.spark.conf) is None
    ):
        return SPARK
    return EMBEDDED
