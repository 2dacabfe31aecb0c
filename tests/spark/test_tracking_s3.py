"""A tracked app's micro-batch on an `s3a://` ledger, in a classic Spark session: its
ledger rows reach the driver as Arrow and are committed by delta-rs with conditional
writes (`driver_writer`); Spark commits nothing to the ledger there, and needs no S3A jars
for it (it reads no `s3a://` path here). The ledger is on the local S3 API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.ledger.storage.store import delta_uri, storage_options
from ackfold.track.stage import StageTracker
from ackfold_dev.s3 import LocalS3


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    with LocalS3(tmp_path_factory.mktemp("s3"), bucket="tracked") as server:
        yield server


def _rows(uri: str) -> int:
    from deltalake import DeltaTable

    table = DeltaTable(delta_uri(uri), storage_options=storage_options(uri))
    return int(table.to_pyarrow_table().num_rows)


def test_a_stage_batch_on_s3a_is_committed_by_delta_rs(
    spark: SparkSession, s3: LocalS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    ledger = Ledger("s3a://tracked/warehouse")
    spout = StageTracker("orders", "spout", ledger=ledger)
    messages = spark.createDataFrame([("m-1", "a b"), ("m-2", "c")], "id string, text string")
    out = spout.spout(messages, message_id="id", source="sqs", source_queue="orders")
    words = str(tmp_path / "words")  # an output table of the app's own, on this machine
    spout.write_batch(0, outputs={words: out.tuples.select("id")}, roots=out.roots,
                      events=[out.events])  # fmt: skip
    assert _rows(ledger.path(ROOTS)) == 2
    assert _rows(ledger.path(ACK_EVENTS)) == 2  # one init event per root
    assert s3.journal is not None
    commits = [
        json.loads(line) for line in s3.journal.read_text().splitlines()
        if "/_delta_log/" in line and ".json" in line
    ]  # fmt: skip
    commits = [c for c in commits if c["path"].endswith(".json") and "/_delta_log/" in c["path"]]
    assert commits, "nothing was committed to the S3 ledger"
    assert all(c["headers"].get("HTTP_IF_NONE_MATCH") == "*" for c in commits), commits
    # Spark's own write went to the local output table, with its transaction id.
    assert spark.read.format("delta").load(words).count() == 2
