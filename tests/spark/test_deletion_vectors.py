"""The deletion-vector tables of `tests/unit/deletion_vectors/`, made afresh by Spark
(`tests.deletion_vector_ledger.make`), read as the plain-Python tests read the committed
ones: Spark's DELETE leaves a vector on one file, the way out the error names (the
property off, then REORG ... APPLY (PURGE)) leaves none and keeps the feature, and
delta-rs reads the purged files to exactly the rows Spark reads."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from deltalake import DeltaTable

from ackfold.config import load_settings
from ackfold.ledger.errors import UnreadableFiles
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE
from ackfold.ledger.storage.vectors import files_with_deletion_vectors
from ackfold.runs.reconcile import run_reconcile
from tests.deletion_vector_ledger import (
    FIXTURES,
    NOW,
    PURGED,
    STATE_WITH_VECTORS,
    WITH_VECTORS,
    make,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TABLES = {WITH_VECTORS: ACK_EVENTS, PURGED: ACK_EVENTS, STATE_WITH_VECTORS: ROOT_STATE}


def test_spark_makes_the_tables_the_fixtures_hold(spark: SparkSession, tmp_path: Path) -> None:
    made = tmp_path / "made"
    make(spark, made, tmp_path / "scratch")
    for name, table in TABLES.items():
        fresh = DeltaTable(str(made / name / table))
        kept = DeltaTable(str(FIXTURES / name / table))
        assert "deletionVectors" in (fresh.protocol().reader_features or []), name
        assert len(files_with_deletion_vectors(fresh)) == len(files_with_deletion_vectors(kept))
    assert len(files_with_deletion_vectors(DeltaTable(str(made / WITH_VECTORS / ACK_EVENTS)))) == 1

    # Spark applies the vectors; after the purge the files alone hold the same rows.
    def spark_rows(name: str) -> list[tuple[object, ...]]:
        frame = spark.read.format("delta").load(str(made / name / ACK_EVENTS))
        return sorted(tuple(r) for r in frame.select("event_id", "ack_val").collect())

    assert spark_rows(PURGED) == spark_rows(WITH_VECTORS)
    import pyarrow.parquet as pq

    purged = DeltaTable(str(made / PURGED / ACK_EVENTS))
    files = [uri.removeprefix("file://") for uri in purged.file_uris()]
    read = pq.read_table(files, columns=["event_id", "ack_val"]).to_pylist()
    assert sorted((r["event_id"], r["ack_val"]) for r in read) == spark_rows(PURGED)

    settings = load_settings(var_dir=tmp_path / "var", warehouse=str(made / WITH_VECTORS))
    with pytest.raises(UnreadableFiles, match=r"REORG TABLE .* APPLY \(PURGE\)"):
        run_reconcile(settings, now=NOW, engine="embedded")
    settings = load_settings(var_dir=tmp_path / "var2", warehouse=str(made / PURGED))
    assert run_reconcile(settings, now=NOW, engine="embedded")["by_status"] == {"completed": 3}
