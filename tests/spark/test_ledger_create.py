"""Spark (`Ledger.create`) and delta-rs (`LedgerWriter.create`) create the same ledger:
the same metadata and protocol in each table's first commit; and the writer appends to
the tables Spark made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ackfold import LedgerWriter, Tracker
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, TABLES, Ledger
from ackfold.ledger.setup.create import create_tables


def _first_commit(path: str) -> dict[str, Any]:
    text = (Path(path) / "_delta_log" / f"{0:020d}.json").read_text()
    actions = [json.loads(line) for line in text.splitlines()]
    meta = next(a["metaData"] for a in actions if "metaData" in a)
    return {
        "schema": json.loads(meta["schemaString"]),
        "partitionColumns": meta["partitionColumns"],
        "description": meta.get("description"),
        "configuration": meta["configuration"],
        "protocol": next(a["protocol"] for a in actions if "protocol" in a),
    }


def test_spark_and_delta_rs_create_the_same_tables(spark: SparkSession, tmp_path: Path) -> None:
    by_spark = Ledger(str(tmp_path / "spark"))
    create_tables(spark, by_spark)
    LedgerWriter(tmp_path / "delta-rs").create()
    for name in TABLES:
        assert _first_commit(str(tmp_path / "delta-rs" / name)) == _first_commit(
            by_spark.path(name)
        ), name

    # The writer takes Spark's tables as they are, and Spark reads what it appends.
    writer = LedgerWriter(by_spark.root)
    assert writer.create() == dict.fromkeys(TABLES, False)
    tracker = Tracker("orders")
    tracker.ack(tracker.spout("m-1", source="sqs", source_queue="in"), stage="store")
    writer.append(tracker.drain_roots(), tracker.drain(), app_id="p", version=1)
    events = spark.read.format("delta").load(by_spark.path(ACK_EVENTS))
    assert sorted(r["kind"] for r in events.collect()) == ["ack", "init"]
    assert spark.read.format("delta").load(by_spark.path(ROOTS)).count() == 1
