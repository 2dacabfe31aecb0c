"""The Spark engine reads `root_state`, `roots` and `unmatched_events` as the data files
delta-rs lists (`ackfold.reconcile.spark_reads`): the files of the current version, by
partition, with the partition values their paths name; the Delta read where the files
do not hold the rows as they are. The Spark side (the same statuses on both engines):
tests/conformance/test_reconcile.py."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from ackfold.config import Settings, load_settings
from ackfold.ledger.schema.tables import ROOT_STATE, ROOTS, Ledger
from ackfold.reconcile.spark_reads import data_files, hive_prefix
from ackfold.runs.reconcile import run_reconcile
from tests.deletion_vector_ledger import FIXTURES, NOW, SPREAD_NOW, STATE_WITH_VECTORS, write_ledger


@pytest.fixture
def settings(clean_env: None, tmp_path: Path) -> Settings:
    return load_settings(var_dir=tmp_path / "var")


def _paths(uris: list[str]) -> set[Path]:
    """Local files, whether named as paths or as `file://` URIs."""
    return {Path(urlparse(u).path if u.startswith("file:") else u).resolve() for u in uris}


def test_the_files_are_the_current_versions_and_their_paths_name_their_partitions(
    settings: Settings,
) -> None:
    write_ledger(Path(settings.table_root))
    run_reconcile(settings, now=NOW, engine="embedded")
    ledger = Ledger(settings.table_root)
    state = DeltaTable(ledger.path(ROOT_STATE))
    files = data_files(ledger, ROOT_STATE)
    assert files is not None
    assert files
    assert _paths(files) == _paths(state.file_uris())
    # Read as Spark reads them (partitions from the paths under the table), the files
    # hold the table's rows, partition values included.
    found = ds.dataset(
        sorted(str(p) for p in _paths(files)),
        partitioning="hive",
        partition_base_dir=str(Path(ledger.path(ROOT_STATE)).resolve()),
    )
    columns = ["root_id", "status", "first_event_date"]
    read = sorted(found.to_table(columns=columns).to_pylist(), key=lambda r: r["root_id"])
    expected = state.to_pyarrow_table(columns=columns).to_pylist()
    assert [(r["root_id"], r["status"]) for r in read] == sorted(
        (r["root_id"], r["status"]) for r in expected
    )
    # An unpartitioned table: every file.
    roots = data_files(ledger, ROOTS)
    assert roots is not None
    assert _paths(roots) == _paths(DeltaTable(ledger.path(ROOTS)).file_uris())


def test_only_the_partitions_kept_are_listed(settings: Settings) -> None:
    write_ledger(Path(settings.table_root), spread=True)
    run_reconcile(settings, now=SPREAD_NOW, engine="embedded")
    ledger = Ledger(settings.table_root)
    days = set(DeltaTable(ledger.path(ROOT_STATE)).to_pyarrow_table()["first_event_date"])
    assert len(days) > 1  # the ledger has several partitions to choose from
    for day in days:
        wanted = day.as_py()
        files = data_files(ledger, ROOT_STATE, keep=lambda p, d=wanted: p["first_event_date"] == d)
        assert files, wanted
        assert all(f"/first_event_date={wanted}/" in f for f in files), wanted
    assert data_files(ledger, ROOT_STATE, keep=lambda p: False) == []


def test_a_table_with_deletion_vectors_is_read_through_delta(settings: Settings) -> None:
    """Its files hold rows deleted beside them: not a file list, the Delta read."""
    try:
        DeltaTable(str(FIXTURES / STATE_WITH_VECTORS / ROOT_STATE))
    except Exception:  # deltalake 1.0 opens no table that lists the feature
        pytest.skip("this deltalake opens no such table")
    shutil.copytree(FIXTURES / STATE_WITH_VECTORS, settings.table_root)
    assert data_files(Ledger(settings.table_root), ROOT_STATE) is None


def test_a_null_partition_value_is_named_as_spark_and_delta_rs_name_it() -> None:
    assert hive_prefix({"status": None}) == "status=__HIVE_DEFAULT_PARTITION__/"
    assert hive_prefix({}) == ""
