"""The smoke job: proves Spark, Delta and the warehouse work together.

It creates a Delta table with an explicit schema, appends, MERGEs, time-travels and
reads it back, and returns what it saw so a caller can check it.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from ackfold.embedded.smoke import check
from ackfold.ledger.commits import dml

SCHEMA = "id BIGINT NOT NULL, word STRING NOT NULL, n BIGINT NOT NULL"
__all__ = ["check", "run_smoke"]


def run_smoke(spark: SparkSession, path: str) -> dict[str, Any]:
    """Round-trip a small Delta table at `path` (replaced if it exists) and report on it.

    All of it is SQL and DataFrames, so it runs the same through Spark Connect."""
    # The table with its NOT NULL columns (a DataFrame write would make them nullable),
    # then an empty overwrite: a new empty version of an earlier run's table. (CREATE OR
    # REPLACE of an identical table kept its rows.)
    spark.sql(f"CREATE TABLE IF NOT EXISTS {dml.table(path)} ({SCHEMA}) USING delta")
    spark.createDataFrame([], SCHEMA).write.format("delta").mode("overwrite").save(path)
    history = spark.sql(f"DESCRIBE HISTORY {dml.table(path)} LIMIT 1").first()
    assert history is not None
    created = int(history["version"])
    rows = [(1, "storm", 1), (2, "spark", 1)]
    spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("append").save(path)
    updates = spark.createDataFrame([(2, "spark", 2), (3, "delta", 1)], SCHEMA)
    dml.merge(
        path,
        updates,
        on="t.id = s.id",
        clauses=["WHEN MATCHED THEN UPDATE SET n = t.n + s.n", "WHEN NOT MATCHED THEN INSERT *"],
    )
    after_append = spark.read.format("delta").option("versionAsOf", created + 1).load(path)
    return {
        "path": path,
        "words": {r.word: r.n for r in spark.read.format("delta").load(path).collect()},
        "rows_after_append": after_append.count(),
    }
