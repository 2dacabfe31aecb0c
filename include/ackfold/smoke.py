"""The smoke job: proves Spark, Delta and the warehouse work together.

It creates a Delta table with an explicit schema, appends, MERGEs, time-travels and
reads it back, and returns what it saw so a caller can check it.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

SCHEMA = "id BIGINT NOT NULL, word STRING NOT NULL, n BIGINT NOT NULL"
EXPECTED = {"storm": 1, "spark": 3, "delta": 1}


def run_smoke(spark: SparkSession, path: str) -> dict[str, Any]:
    """Round-trip a small Delta table at `path` (replaced if it exists) and report on it."""
    from delta.tables import DeltaTable

    _delete_path(spark, path)
    table = (
        DeltaTable.create(spark)
        .location(path)
        .addColumns(spark.createDataFrame([], SCHEMA).schema)
        .execute()
    )
    created = table.history(1).first()["version"]  # type: ignore[index]
    rows = [(1, "storm", 1), (2, "spark", 1)]
    spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("append").save(path)
    updates = spark.createDataFrame([(2, "spark", 2), (3, "delta", 1)], SCHEMA)
    (
        table.alias("t")
        .merge(updates.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"n": "t.n + s.n"})
        .whenNotMatchedInsertAll()
        .execute()
    )
    after_append = spark.read.format("delta").option("versionAsOf", created + 1).load(path)
    return {
        "path": path,
        "words": {r.word: r.n for r in spark.read.format("delta").load(path).collect()},
        "rows_after_append": after_append.count(),
    }


def _delete_path(spark: SparkSession, path: str) -> None:
    # Through Hadoop's FileSystem, so it works for file:, s3a: and hdfs: warehouses alike.
    jvm: Any = spark.sparkContext._jvm
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    hadoop_path.getFileSystem(hadoop_conf).delete(hadoop_path, True)


def check(report: dict[str, Any]) -> bool:
    """True when the round trip saw exactly what it wrote."""
    return bool(report["words"] == EXPECTED and report["rows_after_append"] == 2)
