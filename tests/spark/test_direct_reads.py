"""The embedded engine reads a table's data files itself (DuckDB, or Arrow over delta-rs's
file system), so it must know that the files alone hold the rows: no deletion vectors
(rows deleted or replaced outside the files) and no column mapping (columns under other
names in the files). A table that has either is refused before anything is read, with an
error that names the table and the property. Spark makes the tables (delta-rs writes
neither feature)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.errors import LedgerError
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, Ledger
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


def test_tables_whose_files_do_not_hold_their_rows_are_refused_by_name(
    spark: SparkSession, tmp_path: Path
) -> None:
    now = T0 + timedelta(minutes=10)
    # Deletion vectors on root_state: Spark's DELETE marks rows deleted beside the files.
    settings, ledger, _ = _ledger(tmp_path, "vectors")
    run_reconcile(settings, now=now, engine="embedded")
    path = ledger.path(ROOT_STATE)
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(f"DELETE FROM delta.`{path}` WHERE root_id % 2 = 0")
    late = Tracker("orders", clock=lambda: now)
    late.ack(late.spout("m9"), stage="store")  # something new: the engine runs
    LedgerWriter(settings.table_root).append(late.drain_roots(), late.drain())
    with pytest.raises(LedgerError, match=r"root_state.*delta\.enableDeletionVectors") as raised:
        run_reconcile(settings, now=now + timedelta(minutes=1), engine="embedded")
    assert "REORG TABLE" in str(raised.value)

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
