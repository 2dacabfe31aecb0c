"""An earlier ackfold's root_state (partitioned by first_event_date alone, with the NOT NULL
`last_event_id` this one no longer writes) is read as it is, upgraded by the reconcile
before anything checks or writes it, and left as it was when its upgrade fails.

The ledger is the golden case `ackfold-0.1` (tests/golden), as that release left it."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.errors import SchemaMismatch
from ackfold.ledger.schema.tables import ROOT_STATE, ROOT_STATE_PARTITIONS
from ackfold.runs.reconcile import run_reconcile
from tests.conftest import PROJECT_DIR

CASE = PROJECT_DIR / "tests" / "golden" / "ackfold-0.1"
NOW = datetime.fromisoformat("2026-12-04T21:56:00+00:00")


def _settings(tmp_path: Path) -> Settings:
    settings = load_settings(
        var_dir=tmp_path / "var", warehouse=str(tmp_path / "warehouse"),
        defaults={"timeout": "1h"}, engine={"kind": "embedded"},
    )  # fmt: skip
    shutil.copytree(CASE / "ledger", settings.table_root)
    return settings


def _state(settings: Settings) -> DeltaTable:
    return DeltaTable(f"{settings.table_root}/{ROOT_STATE}")


def test_the_old_root_state_is_read_as_it_is_and_init_commits_nothing(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    before = _state(settings).version()
    created = LedgerWriter(settings.table_root).create()
    assert created[ROOT_STATE] is False
    assert _state(settings).version() == before
    assert "last_event_id" in _state(settings).schema().to_arrow().names


def test_a_reconcile_upgrades_the_old_root_state_before_it_checks_it(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert _state(settings).metadata().partition_columns == ["first_event_date"]
    run_reconcile(settings, now=NOW, engine="embedded")
    table = _state(settings)
    assert tuple(table.metadata().partition_columns) == ROOT_STATE_PARTITIONS
    assert "last_event_id" not in table.schema().to_arrow().names
    assert table.to_pyarrow_table().num_rows > 0


def test_a_failed_upgrade_leaves_root_state_as_it_was(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    # An old root_state that lacks a column the current layout keeps: no upgrade can fill it.
    old = _state(settings)
    rows = old.to_pyarrow_table()
    write_deltalake(
        old,
        rows.drop_columns(["seen_event_hashes"]),
        mode="overwrite",
        schema_mode="overwrite",
        partition_by=["first_event_date"],
    )
    before = _state(settings)
    files, schema = sorted(before.file_uris()), before.schema().to_arrow()
    with pytest.raises(SchemaMismatch, match="seen_event_hashes"):
        run_reconcile(settings, now=NOW, engine="embedded")
    after = _state(settings)
    # The run's lease claim may commit (no data); the upgrade committed nothing.
    assert sorted(after.file_uris()) == files
    assert pa.schema(after.schema().to_arrow()) == pa.schema(schema)
    assert after.metadata().partition_columns == ["first_event_date"]
    assert after.to_pyarrow_table().num_rows == rows.num_rows
