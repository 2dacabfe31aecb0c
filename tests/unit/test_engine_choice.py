"""Which engine folds the ledger (issue 55): Spark only where each of its commits to the
derived tables is put-if-absent. Settings in, the engine or the refusal out; no JVM."""

from __future__ import annotations

import pytest

from ackfold.config import load_settings
from ackfold.engines import EMBEDDED, SPARK, engine_for
from ackfold.ledger.errors import UnsafeSparkCommits
from ackfold.ledger.storage.protocol import refuse_unsafe_spark_engine, unsafe_spark_commits

DYNAMODB = {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"}
MOUNTS = """\
overlay / overlay rw,relatime 0 0
/dev/sda1 /srv ext4 rw,relatime 0 0
nas:/export/lake /mnt/lake nfs4 rw,relatime 0 0
sshfs#me@host:/data /mnt/fuse fuse.sshfs rw 0 0
"""


def test_auto_with_spark_connect_folds_on_the_embedded_engine_on_s3() -> None:
    """Before issue 55 `spark.remote` made `auto` choose Spark on S3, whose commits there
    are unconditional PUTs."""
    remote = {"remote": "sc://spark-connect:15002"}
    assert engine_for(load_settings(warehouse="s3a://lake/w", spark=remote)) == EMBEDDED
    assert engine_for(load_settings(warehouse="gs://lake/w", spark=remote)) == SPARK
    assert engine_for(load_settings(warehouse="/srv/w", spark=remote)) == SPARK
    s3_dynamodb = load_settings(warehouse="s3a://lake/w", spark={**remote, "conf": DYNAMODB})
    assert engine_for(s3_dynamodb) == SPARK


def test_the_spark_engine_on_s3_is_refused_naming_the_store_and_the_ways_out() -> None:
    settings = load_settings(warehouse="s3a://lake/w", engine={"kind": "spark"})
    with pytest.raises(UnsafeSparkCommits) as refused:
        engine_for(settings)
    said = str(refused.value)
    assert "S3 (s3a://lake/w) with Delta's S3SingleDriverLogStore" in said
    assert "engine.kind: embedded" in said
    assert "io.delta.storage.S3DynamoDBLogStore" in said
    # A DAG built elsewhere still makes the Spark task; the task's run refuses.
    assert engine_for(settings, refuse=False) == SPARK
    spark_conf = {"kind": "spark"}
    with_dynamodb = load_settings(warehouse="s3a://lake/w", engine=spark_conf,
                                  spark={"conf": DYNAMODB})  # fmt: skip
    assert engine_for(with_dynamodb) == SPARK


@pytest.mark.parametrize("warehouse", ["gs://lake/w", "abfss://c@acct.dfs.core.windows.net/w",
                                       "hdfs://nn/w"])  # fmt: skip
def test_the_spark_engine_where_its_commits_are_put_if_absent(warehouse: str) -> None:
    assert engine_for(load_settings(warehouse=warehouse, engine={"kind": "spark"})) == SPARK


def test_a_shared_file_system_is_refused_and_one_hosts_disk_is_not() -> None:
    assert unsafe_spark_commits("/srv/w", {}, mounts=MOUNTS) is None
    nfs = unsafe_spark_commits("/mnt/lake/w", {}, mounts=MOUNTS)
    assert nfs is not None
    assert "shared file system (nfs4 at /mnt/lake" in nfs
    fuse = unsafe_spark_commits("file:///mnt/fuse/w", {}, mounts=MOUNTS)
    assert fuse is not None
    assert "fuse.sshfs" in fuse
    settings = load_settings(warehouse="/mnt/lake/w", engine={"kind": "spark"})
    with pytest.raises(UnsafeSparkCommits, match=r"nfs4 at /mnt/lake.*engine\.kind: embedded"):
        refuse_unsafe_spark_engine(settings, mounts=MOUNTS)
    refuse_unsafe_spark_engine(load_settings(warehouse="/srv/w"), mounts=MOUNTS)
