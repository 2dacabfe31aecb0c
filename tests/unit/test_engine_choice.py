"""`engine.kind: auto` runs the embedded engine wherever the ledger's writer commits with
delta-rs (a local disk, every object store), and Spark elsewhere: one rule, the store's."""

from __future__ import annotations

import pytest

from ackfold.config import load_settings
from ackfold.embedded import EMBEDDED, SPARK, engine_for
from ackfold.ledger.store import is_object_store


@pytest.mark.parametrize(
    "warehouse",
    ["/srv/warehouse", "file:///srv/warehouse", "s3://b/w", "s3a://b/w", "s3n://b/w",
     "gs://b/w", "abfss://c@a.dfs.core.windows.net/w", "az://c/w", "adl://a/w"],
)  # fmt: skip
def test_auto_is_embedded_on_a_local_disk_and_every_object_store(warehouse: str) -> None:
    assert engine_for(load_settings(warehouse=warehouse)) == EMBEDDED


@pytest.mark.parametrize("warehouse", ["hdfs://nn/warehouse", "viewfs://cluster/warehouse"])
def test_auto_is_spark_where_delta_rs_does_not_commit(warehouse: str) -> None:
    assert not is_object_store(warehouse)
    assert engine_for(load_settings(warehouse=warehouse)) == SPARK
