"""A fresh start creates the ledger's tables once: `make run` (`ackfold up`) creates them
before it starts its processes, and a table another process created meanwhile is what
CREATE TABLE IF NOT EXISTS asked for, not a conflict to warn of and retry."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import REPLAY_LOG, TABLES, Ledger
from ackfold.ledger.setup.create import create_tables
from ackfold_dev.stack import create_ledger

pytestmark = pytest.mark.usefixtures("clean_env")


def test_the_stack_creates_every_table_once_before_its_processes(tmp_path: Path) -> None:
    settings = load_settings(var_dir=tmp_path)
    said: list[str] = []
    assert create_ledger(settings, said.append) == list(TABLES)
    assert said == [f"created the ledger's tables in {settings.table_root}: {', '.join(TABLES)}"]
    for name in TABLES:
        assert DeltaTable(f"{settings.table_root}/{name}").version() == 0
    # A restart finds them: nothing made, nothing said.
    assert create_ledger(settings, said.append) == []
    assert len(said) == 1


class _RacingSession:
    """Stands in for the Spark session of a process that starts beside another: the
    other process (a real delta-rs writer) creates the table first, and this one's CREATE
    then raises the conflict Delta raises when it loses that race. `other_wins=False`: the
    conflict comes, but no table is there (a real conflict), then the retry creates it."""

    def __init__(self, warehouse: str, *, other_wins: bool = True) -> None:
        self.warehouse = warehouse
        self.other_wins = other_wins
        self.calls = 0

    def sql(self, statement: str) -> Any:
        from delta.exceptions import ProtocolChangedException

        self.calls += 1
        name = REPLAY_LOG
        if self.calls == 1:
            if self.other_wins:
                LedgerWriter(self.warehouse).create([name])
            raise ProtocolChangedException(message="The protocol version of the Delta table "
                                           "has been changed by a concurrent update.")  # fmt: skip
        LedgerWriter(self.warehouse).create([name])
        return None


def test_a_table_another_process_created_meanwhile_is_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = str(tmp_path / "warehouse")
    session = _RacingSession(warehouse)
    with caplog.at_level(logging.DEBUG, logger="ackfold"):
        create_tables(session, Ledger(warehouse), (REPLAY_LOG,))  # type: ignore[arg-type]
    assert session.calls == 1, "not retried: the table is there"
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert DeltaTable(f"{warehouse}/{REPLAY_LOG}").version() == 0


def test_a_conflict_that_left_no_table_is_still_retried_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = str(tmp_path / "warehouse")
    session = _RacingSession(warehouse, other_wins=False)
    with caplog.at_level(logging.WARNING, logger="ackfold"):
        create_tables(session, Ledger(warehouse), (REPLAY_LOG,))  # type: ignore[arg-type]
    assert session.calls == 2
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "ProtocolChangedException (a concurrent commit got there first); try 2 of" in warning
