"""The mark a reconcile leaves in its checkpoint (`ackfold.reconcile.quiet`): where it can
be kept, and that only a whole, legible one counts."""

from __future__ import annotations

from pathlib import Path

from ackfold.reconcile.quiet import MARK, local_dir, read_mark, save_mark, table_version


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
    assert read_mark(str(tmp_path / "elsewhere")) is None


def test_no_mark_where_there_is_no_checkpoint(tmp_path: Path) -> None:
    save_mark(str(tmp_path / "never-started"), ("id", 1))
    assert not (tmp_path / "never-started").exists()
    assert table_version(str(tmp_path / "no-table")) is None
