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


def test_the_spark_engines_reads_of_the_derived_tables_run_no_spark_job(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`root_state`, `roots` and `unmatched_events` are read as the files delta-rs lists
    (`ackfold.reconcile.spark_reads`): planning the fold's inputs runs no Delta snapshot or
    file-listing job (each was one or more Spark jobs a read, and again after every commit
    to `root_state` for the cached plans that named it), and they hold the tables' rows."""
    from deltalake import DeltaTable

    from ackfold.ledger.schema.tables import ROOT_STATE
    from ackfold.reconcile.reconciler import Reconciler
    from ackfold.reconcile.state import known_roots, open_state

    settings, ledger, _ = _ledger(tmp_path, "reads")
    now = T0 + timedelta(minutes=10)
    run_reconcile(settings, now=now, engine="embedded")
    since = (now - timedelta(days=30)).date()
    reconciler = Reconciler(spark, settings, now=now)  # type: ignore[arg-type]
    group = "test: the reconcile's reads"
    spark.sparkContext.setJobGroup(group, group)
    try:
        frames = {
            "open_state": open_state(spark, ledger, since=since),
            "known_roots": known_roots(spark, ledger, since=since),
            "roots": reconciler._registrations(since),
            "unmatched_events": reconciler._waiting_events(),
        }
        for frame in frames.values():
            frame.explain()  # planned, as the fold plans them
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert jobs == [], f"the reads ran Spark jobs {jobs}"
    state = DeltaTable(ledger.path(ROOT_STATE)).to_pyarrow_table(columns=["root_id", "status"])
    read = frames["open_state"].select("root_id").union(frames["known_roots"])
    assert {r["root_id"] for r in read.collect()} == set(state.column("root_id").to_pylist())
    assert frames["roots"].count() == 4
    assert frames["unmatched_events"].count() == 0


def test_a_commit_to_root_state_plans_no_cached_read_of_it_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark's save ends by planning again every cached plan that names the table it wrote
    (`CacheManager.recacheByPlan`): with the fold's inputs read through Delta, each commit
    to `root_state` re-ran their snapshot and file-listing jobs. Read from their files, the
    cached fold names no Delta table, and a commit costs what it costs with nothing cached."""
    from pyspark.sql import functions as F

    from ackfold.ledger.schema.tables import ROOT_STATE
    from ackfold.reconcile.state import COLUMNS, open_state

    settings, ledger, _ = _ledger(tmp_path, "recache")
    now = T0 + timedelta(minutes=10)
    run_reconcile(settings, now=now, engine="embedded")
    path = ledger.path(ROOT_STATE)
    tracker = spark.sparkContext.statusTracker()

    def jobs_of_an_append(group: str) -> int:
        rows = spark.read.format("delta").load(path).select(*COLUMNS).limit(1)
        rows = rows.localCheckpoint()  # its own jobs, outside the group
        spark.sparkContext.setJobGroup(group, group)
        try:
            rows.write.format("delta").mode("append").save(path)
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        return len(tracker.getJobIdsForGroup(group))

    jobs_of_an_append("test: a first append")  # the snapshot built, a .crc written
    alone = jobs_of_an_append("test: an append, nothing cached")
    since = (now - timedelta(days=30)).date()
    fold = open_state(spark, ledger, since=since).groupBy("status").agg(F.count("*")).cache()
    try:
        fold.count()
        assert jobs_of_an_append("test: an append, the fold cached") == alone
    finally:
        fold.unpersist()
