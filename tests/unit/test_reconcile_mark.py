"""The mark a reconcile leaves in its checkpoint (`ackfold.reconcile.quiet`): where it can
be kept, and that only a whole, legible one counts."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ackfold.config import load_settings
from ackfold.ledger.tables import ACK_EVENTS, ROOT_STATE, Ledger
from ackfold.ledger.writer import LedgerWriter
from ackfold.reconcile.quiet import (
    MARK,
    local_dir,
    quiet_summary,
    read_mark,
    save_mark,
    table_version,
)
from ackfold.reconcile.reconciler import reconcile_checkpoint
from tests.conftest import JARS_DIR


def test_only_a_directory_of_this_machine_can_keep_a_mark() -> None:
    assert local_dir("/srv/warehouse") == Path("/srv/warehouse")
    assert local_dir("file:///srv/ware%20house") == Path("/srv/ware house")
    assert local_dir("s3a://bucket/warehouse") is None
    assert table_version("s3a://bucket/warehouse/ack_events") is None


def test_a_mark_reads_back_and_a_damaged_one_is_no_mark(tmp_path: Path) -> None:
    save_mark(str(tmp_path), ("f0774700-8249-4a25-b2e7-ca956ce170ad", 7))
    assert read_mark(str(tmp_path)) == ("f0774700-8249-4a25-b2e7-ca956ce170ad", 7)
    assert [p.name for p in tmp_path.iterdir()] == [MARK], "no staged file left behind"
    (tmp_path / MARK).write_text('{"ack_events_id": "f077')
    assert read_mark(str(tmp_path)) is None
    (tmp_path / MARK).write_text('{"ack_events_id": "f077", "ack_events_version": 7}')
    assert read_mark(str(tmp_path)) is None, "a mark of another format is no mark"
    assert read_mark(str(tmp_path / "elsewhere")) is None


def test_no_mark_where_there_is_no_checkpoint(tmp_path: Path) -> None:
    save_mark(str(tmp_path / "never-started"), ("id", 1))
    assert not (tmp_path / "never-started").exists()
    assert table_version(str(tmp_path / "no-table")) is None


def test_a_mark_that_cannot_be_written_leaves_the_run_successful(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / MARK).mkdir()  # in the way of the mark
    save_mark(str(tmp_path), ("id", 1))
    assert "the next run will start Spark" in caplog.text


def test_on_a_marked_ledger_a_quiet_run_counts_it_and_a_damaged_one_goes_to_spark(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The no-JVM half alone: tables made by delta-rs, a mark naming the events' version."""
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    LedgerWriter(settings.table_root).create()
    ledger = Ledger(settings.table_root)
    checkpoint = Path(reconcile_checkpoint(ledger, None))
    checkpoint.mkdir(parents=True)
    read = table_version(ledger.path(ACK_EVENTS))
    assert read is not None
    save_mark(str(checkpoint), read)
    now = datetime(2026, 11, 27, tzinfo=UTC)
    quiet = quiet_summary(settings, checkpoint=str(checkpoint), now=now, since=now.date(), app=None)
    assert quiet == {
        "app": None, "now": now.isoformat(), "events_read": 0, "events_folded": 0,
        "duplicates_dropped": 0, "roots_updated": 0, "unmatched_events": 0, "by_status": {},
    }  # fmt: skip

    caplog.set_level(logging.DEBUG, logger="ackfold.reconcile")
    log = Path(ledger.path(ROOT_STATE)) / "_delta_log"
    (log / "00000000000000000001.json").write_text("{not json\n")
    assert (
        quiet_summary(settings, checkpoint=str(checkpoint), now=now, since=now.date(), app=None)
        is None
    )
    assert "Spark runs" in caplog.text
