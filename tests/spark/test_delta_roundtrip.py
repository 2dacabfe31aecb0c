"""Spark with real Delta: explicit schema, append, MERGE, time travel, a delta-rs read, and
a second run that replaces the table."""

from __future__ import annotations

import deltalake
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from ackfold.embedded.smoke import EXPECTED
from ackfold.spark.smoke import check, run_smoke


def test_round_trip_creates_appends_merges_time_travels_and_delta_rs_reads_it(
    spark: SparkSession, table_path: str
) -> None:
    # One table for every assertion: each run of the smoke is a few Spark jobs.
    report = run_smoke(spark, table_path)
    assert report["words"] == EXPECTED
    assert report["rows_after_append"] == 2
    assert check(report)

    operations = [
        row.operation for row in DeltaTable.forPath(spark, table_path).history().collect()
    ]
    assert operations == ["MERGE", "WRITE", "CREATE TABLE"]
    schema = spark.read.format("delta").load(table_path).schema
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in schema] == [
        ("id", "bigint", False),
        ("word", "string", False),
        ("n", "bigint", False),
    ]
    # Version 0 is the empty table as created.
    assert spark.read.format("delta").option("versionAsOf", 0).load(table_path).count() == 0

    # delta-rs reads what Spark wrote. Reader version 1 keeps the table readable by
    # delta-rs for the CLI and UI.
    table = deltalake.DeltaTable(table_path)
    assert table.protocol().min_reader_version == 1
    frame = table.to_pandas()
    assert dict(zip(frame["word"], frame["n"], strict=True)) == EXPECTED
    assert deltalake.DeltaTable(table_path, version=0).to_pandas().empty
    assert len(deltalake.DeltaTable(table_path, version=1).to_pandas()) == 2

    # Running the round trip again replaces the table: it starts from an empty version.
    assert check(run_smoke(spark, table_path))
