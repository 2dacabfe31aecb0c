"""The fence (`ackfold.ledger.commits.fence`) on Spark's commits: a MERGE, an append and an
overwrite carry the lease's epoch as their Delta transaction (`txnAppId`/`txnVersion`);
once a newer epoch has claimed the table Spark skips them without an error, and ackfold,
reading the table after, raises `LeaseLost`; a retry of a commit that landed is skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from ackfold.ledger.commits import dml
from ackfold.ledger.commits.fence import FENCE_APP, STRIDE, Fence
from ackfold.ledger.errors import LeaseLost


def test_spark_commits_of_an_older_epoch_are_skipped_and_said_to_be(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a")], "id BIGINT, v STRING").write.format("delta").save(path)
    old, new = Fence(str(tmp_path), epoch=4), Fence(str(tmp_path), epoch=5)

    source = spark.createDataFrame([(1, "b")], "id BIGINT, v STRING")
    merged = old.spark_commit(
        path,
        lambda txn: dml.merge(
            path, source, on="t.id = s.id", clauses=["WHEN MATCHED THEN UPDATE SET v = s.v"],
            txn=txn,
        ),
        what="MERGE",
    )  # fmt: skip
    assert dml.metric(merged, "num_affected_rows") == 1
    held = DeltaTable(path).transaction_version(FENCE_APP)
    assert held == 4 * STRIDE + 1

    new.claim([path])
    extra = spark.createDataFrame([(2, "c")], "id BIGINT, v STRING")
    with pytest.raises(LeaseLost, match=r"lease epoch 5 \(this run's is 4\)"):
        old.spark_commit(
            path,
            lambda txn: dml.with_txn(extra.write.format("delta").mode("append"), txn).save(path),
            what="append",
        )
    with pytest.raises(LeaseLost):
        old.spark_commit(
            path,
            lambda txn: dml.merge(
                path, source, on="t.id = s.id", clauses=["WHEN MATCHED THEN DELETE"], txn=txn
            ),
            what="MERGE",
        )
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, "b")], "nothing of the older epoch landed after the claim"

    # The newer run's own commits go through, and a retry of one that landed is skipped.
    def append(txn: tuple[str, int] | None) -> None:
        dml.with_txn(extra.write.format("delta").mode("append"), txn).save(path)
        if txn is not None:
            dml.with_txn(extra.write.format("delta").mode("append"), txn).save(path)  # again

    new.spark_commit(path, append, what="append")
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, "b"), (2, "c")]
