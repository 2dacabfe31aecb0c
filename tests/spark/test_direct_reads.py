"""The embedded engine reads a table's data files itself (DuckDB, or Arrow over delta-rs's
file system), so it must know that the files alone hold the rows: no deletion vectors
(rows deleted or replaced outside the files) and no column mapping (columns under other
names in the files). A table that has either is refused before anything is read, with an
error that names the table and the property. Spark makes the table here (delta-rs writes
neither feature). Deletion vectors, on `ack_events` and on `root_state`, are refused in
plain Python, from the tables Spark made once (`tests/unit/test_deletion_vectors.py`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.errors import LedgerError
from ackfold.ledger.schema.tables import ACK_EVENTS, Ledger
from ackfold.runs.reconcile import run_reconcile
from ackfold.track.tracker import Tracker
from tests.conftest import JARS_DIR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def _ledger(tmp_path: Path, name: str) -> tuple[object, Ledger, list[dict[str, object]]]:
    settings = load_settings(var_dir=tmp_path / name, jars_dir=JARS_DIR)
    ticks = iter(T0 + timedelta(seconds=i) for i in range(1000))
    tracker = Tracker("orders", clock=ticks.__next__)
    for n in range(4):
        root = tracker.spout(f"m{n}")
        child = tracker.emit([root], stage="split")
        tracker.ack(root, stage="split")
        tracker.ack(child, stage="store")
    events = tracker.drain()
    LedgerWriter(settings.table_root).append(tracker.drain_roots(), events)
    return settings, Ledger(settings.table_root), events


def test_a_table_with_column_mapping_is_refused_by_name(
    spark: SparkSession, tmp_path: Path
) -> None:
    now = T0 + timedelta(minutes=10)
    # Column mapping on ack_events: the files name their columns otherwise.
    settings, ledger, _ = _ledger(tmp_path, "mapping")
    path = ledger.path(ACK_EVENTS)
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.minReaderVersion' = '2', "
        "'delta.minWriterVersion' = '5', 'delta.columnMapping.mode' = 'name')"
    )
    # Spark's next file stores the columns under their physical names.
    spark.sql(
        f"INSERT INTO delta.`{path}` SELECT 'late', 'orders', 7, 'ack', 0, 'store', "
        "TIMESTAMP '2026-11-22 10:01:00+00:00', NULL"
    )
    with pytest.raises(LedgerError, match=r"ack_events.*delta\.columnMapping\.mode"):
        run_reconcile(settings, now=now, engine="embedded")
