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


def engine_for(settings: Settings) -> Literal["embedded", "spark"]:
    """The engine `settings` choose: `engine.kind`, with `auto` resolved by the warehouse.

    Example:
        >>> from ackfold.config import load_settings
        >>> engine_for(load_settings(warehouse="/srv/warehouse"))
        'embedded'
        >>> engine_for(load_settings(warehouse="hdfs://nn/warehouse"))
        'spark'
        >>> engine_for(load_settings(warehouse="s3a://lake/warehouse"))
        'embedded'
        >>> engine_for(load_settings(warehouse="/srv/warehouse", engine={"kind": "spark"}))
        'spark'
    """
    kind = settings.engine.kind
    if kind != "auto":
        return kind
    if settings.spark.remote:  # the team runs its jobs on a Spark Connect server
        return SPARK
    # delta-rs commits to a local disk and every object store: all but `other` (HDFS, ...).
    return EMBEDDED if store_kind(settings.table_root) != "other" else SPARK
