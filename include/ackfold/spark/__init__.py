"""What a Spark session of ackfold's needs, and nothing of the development servers:

- `session`: the one place a session is made (local, a cluster's master or Spark Connect);
- `conf`: every setting a session needs (Delta, sizes for small machines, jars, quiet logs);
- `connect`: Spark Connect sessions, and query starts that survive a busy server;
- `python`: the executors' Python, checked against the driver's;
- `jars`: the JVM jars (Delta, the Kafka connector), resolved from Maven and verified;
- `frames`: rows the driver holds as a DataFrame, through Arrow (no Python worker);
- `smoke`: the smoke job's body.

The spark-submit entry points of ackfold's jobs are `ackfold.jobs`, a floor above.

Example:
    >>> from ackfold.spark import get_spark
    >>> spark = get_spark()  # local[*] unless ACKFOLD_SPARK__MASTER says otherwise
    >>> spark.range(3).count()
    3
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ackfold import lazy

if TYPE_CHECKING:
    from ackfold.spark.conf import spark_conf, spark_jars
    from ackfold.spark.connect import SparkConnectError, connect_address, is_connect, start_query
    from ackfold.spark.session import SparkMasterUnreachable, get_spark

__all__ = [
    "SparkConnectError",
    "SparkMasterUnreachable",
    "connect_address",
    "get_spark",
    "is_connect",
    "spark_conf",
    "spark_jars",
    "start_query",
]


# On first use: `ackfold.spark.jars` (the jar cache) needs no session, and the session
# module imports every setting.
_LAZY = {
    **dict.fromkeys(("spark_conf", "spark_jars"), "ackfold.spark.conf"),
    **dict.fromkeys(
        ("SparkConnectError", "connect_address", "is_connect", "start_query"),
        "ackfold.spark.connect",
    ),
    **dict.fromkeys(("SparkMasterUnreachable", "get_spark"), "ackfold.spark.session"),
}


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _LAZY, name)
