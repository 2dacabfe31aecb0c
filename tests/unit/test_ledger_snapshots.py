"""Fewer Delta table opens, the same fence (issue 55): a run's commits reuse one
`DeltaTable` per table, brought up to date with `update_incremental`, and the lease the
fence reads before each commit is kept the same way; a holder paused past its lease still
changes nothing, whatever snapshots it kept.

The opens are counted by wrapping `DeltaTable.__init__` (the real one runs): every table a
commit reads, the library's or delta-rs's own, is one of them."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold import Tracker
from ackfold.ledger.commits import fence as fences
from ackfold.ledger.commits.fence import FENCE_APP, STRIDE, Fence, holding
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.errors import LeaseLost
from ackfold.ledger.schema.tables import ROOT_STATE, Ledger


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URIs of the `DeltaTable`s constructed, in order."""
    seen: list[str] = []
    real = DeltaTable.__init__

    def counted(self: DeltaTable, table_uri: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(str(table_uri))
        real(self, table_uri, *args, **kwargs)

    monkeypatch.setattr(DeltaTable, "__init__", counted)
    return seen


def _append(value: int) -> Callable[[Any, Any], None]:
    def append(table: Any, properties: Any) -> None:
        write_deltalake(table, pa.table({"a": [value]}), mode="append",
                        commit_properties=properties)  # fmt: skip

    return append


def _values(path: str) -> list[int]:
    return sorted(DeltaTable(path).to_pyarrow_table()["a"].to_pylist())


def _fenced_commits(warehouse: str, state: str, commits: int, opens: list[str]) -> int:
    """The tables opened by one hold of the lease that makes `commits` fenced commits."""
    with LedgerLease(warehouse).held("counted") as fence, holding(fence):
        before = len(opens)
        fence.claim([state])
        for n in range(commits):
            fences.commit(warehouse, state, _append(n), what="a counted commit")
        return len(opens) - before


def test_a_runs_fenced_commits_open_each_table_once_not_once_a_commit(
    tmp_path: Path, opens: list[str]
) -> None:
    """Before issue 55's change each fenced commit opened its table afresh, and the lease
    too (the fence's read of its epoch): 2 opens a commit, 10,900 in a soak's month."""
    warehouse = str(tmp_path)
    state = Ledger(warehouse).path(ROOT_STATE)
    write_deltalake(state, pa.table({"a": [0]}))
    few = _fenced_commits(warehouse, state, 2, opens)
    many = _fenced_commits(warehouse, state, 12, opens)
    assert many <= few, f"12 commits opened {many} tables, 2 commits {few}: not constant"
    assert few <= 2, opens  # the table (claimed), the lease (kept from its take), no more
    assert len(_values(state)) == 1 + 2 + 12


def test_a_writers_appends_open_each_table_once(tmp_path: Path, opens: list[str]) -> None:
    """A producer's `LedgerWriter.append`s (roots, then ack_events) on a local disk: the
    tables are opened when the writer first reads them, then only refreshed."""
    writer = LedgerWriter(tmp_path)
    writer.append(*_rows(writer, 0))
    first = len(opens)
    for n in range(1, 9):
        writer.append(*_rows(writer, n))
    assert len(opens) == first, opens[first:]
    table = DeltaTable(writer.uri("roots"))
    assert table.to_pyarrow_table().num_rows == 9
    assert table.version() == 9  # made (0), then one commit an append


def test_a_table_made_anew_at_its_path_is_not_written_from_the_old_snapshot(
    tmp_path: Path,
) -> None:
    """A local table deleted and made again (a reset) while a writer kept its snapshot:
    the writer reads the new table, not the old one's files with the new one's commits,
    and its append lands as the new table's next version."""
    writer = LedgerWriter(tmp_path)
    for n in range(2):
        writer.append(*_rows(writer, n))
    assert writer.table("roots").version() == 2
    shutil.rmtree(tmp_path / "roots")
    shutil.rmtree(tmp_path / "ack_events")
    fresh = LedgerWriter(tmp_path)  # made anew, by another writer
    for n in range(10, 14):
        fresh.append(*_rows(fresh, n))
    kept = writer.table("roots")
    assert kept.version() == 4
    assert kept.to_pyarrow_table().num_rows == 4
    writer.append(*_rows(writer, 20))
    table = DeltaTable(writer.uri("roots"))
    assert table.version() == 5
    assert table.to_pyarrow_table().num_rows == 5


def test_a_paused_holder_with_kept_snapshots_commits_nothing(tmp_path: Path) -> None:
    """A holder commits (its fence keeps the table and the lease), is paused past its
    lease, another host takes it (a clock an hour ahead: the first holder's has expired)
    and claims the table. Woken, the first holder's commits are refused, and the table
    has no new version: its kept snapshots are brought up to date before each check."""
    warehouse = str(tmp_path)
    state = Ledger(warehouse).path(ROOT_STATE)
    write_deltalake(state, pa.table({"a": [0]}))
    ahead = LedgerLease(warehouse, clock=lambda: datetime.now(UTC) + timedelta(hours=1))
    with LedgerLease(warehouse).held("paused") as old:
        old.commit(state, _append(1))
        old.commit(state, _append(2))
        with ahead.held("the next run") as new:
            assert new.epoch == old.epoch + 1
            new.claim([state])
            new.commit(state, _append(3))
        version = DeltaTable(state).version()
        with pytest.raises(LeaseLost, match="lost the ledger's lease"):
            old.commit(state, _append(9))
    assert DeltaTable(state).version() == version
    assert _values(state) == [0, 1, 2, 3]


def test_a_stale_snapshot_does_not_pass_the_tables_own_fence(tmp_path: Path) -> None:
    """Without the lease's read (the courtesy check), the table's epoch alone refuses the
    paused holder: after the claim (its kept snapshot is refreshed, and holds the newer
    epoch) and across it (it read the table, then the claim landed, then it commits:
    Delta's conflict check, then the refresh, refuse it)."""
    state = str(tmp_path / "t")
    write_deltalake(state, pa.table({"a": [0]}))
    old, new = Fence(str(tmp_path), epoch=4), Fence(str(tmp_path), epoch=5)
    old.commit(state, _append(1))  # kept by the old fence at this version
    new.claim([state])
    with pytest.raises(LeaseLost, match="epoch 5"):
        old.commit(state, _append(2))

    claimed: list[bool] = []

    def claim_meanwhile(path: str, moment: str) -> None:
        if moment == "before" and not claimed:
            claimed.append(True)
            Fence(str(tmp_path), epoch=6).claim([path])

    fences.COMMIT_HOOKS.append(claim_meanwhile)
    try:
        with pytest.raises(LeaseLost, match="epoch 6"):
            new.commit(state, _append(4))
    finally:
        fences.COMMIT_HOOKS.remove(claim_meanwhile)
    assert _values(state) == [0, 1]
    assert DeltaTable(state).transaction_version(FENCE_APP) == 6 * STRIDE + 1


def _rows(writer: LedgerWriter, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A root and its spout's event, as a producer's tracker makes them."""
    tracker = Tracker("orders", ledger=writer)
    order = tracker.spout(f"order-{n}", source="sqs", source_queue="orders", payload="{}")
    tracker.ack(order, stage="store")
    return tracker.drain_roots(), tracker.drain()


def test_counts_by_status_from_the_log_are_the_rows_counts(tmp_path: Path) -> None:
    """A reconcile's summary counts all apps' roots by status from the log's row counts
    per `status` partition (no data read): the same as a GROUP BY over the rows, after
    MERGEs that move rows between partitions and leave a partition empty."""
    from ackfold.ledger.schema.tables import rows_by_partition

    path = str(tmp_path / "state")
    rows = pa.table({"root_id": list(range(9)), "status": ["pending"] * 6 + ["completed"] * 3})
    write_deltalake(path, rows, partition_by=["status"])
    for moved, to in (([0, 1, 2], "completed"), ([3, 4, 5], "timed_out"), ([3], "replayed")):
        source = pa.table({"root_id": moved, "status": [to] * len(moved)})
        (
            DeltaTable(path)
            .merge(source, "t.root_id = s.root_id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .execute()
        )
    table = DeltaTable(path)
    by_rows = table.to_pyarrow_table().group_by("status").aggregate([("root_id", "count")])
    expected = dict(zip(by_rows["status"].to_pylist(), by_rows["root_id_count"].to_pylist(),
                        strict=True))  # fmt: skip
    assert "pending" not in expected  # its partition emptied
    assert rows_by_partition(table, "status") == dict(sorted(expected.items()))
    assert rows_by_partition(table, "root_id") is None  # not a partition: counted otherwise


def test_a_refresh_that_finds_no_commit_checks_its_commit_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept table is checked (its commit file's identity: a HEAD on an object store)
    before each refresh; when the refresh finds no new commit, that check is its stamp
    again, not a second look at the same file. A new commit is stamped anew."""
    from ackfold.ledger.storage import snapshots

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"a": [1]}))
    looked: list[int] = []
    real = snapshots._identity

    def counted(uri: str, version: int, *args: Any) -> Any:
        looked.append(version)
        return real(uri, version, *args)

    monkeypatch.setattr(snapshots, "_identity", counted)
    kept = snapshots.Snapshots()
    first = kept.table(path)
    assert looked == [0]  # opened: stamped
    for _ in range(3):
        assert kept.table(path) is first
    assert looked == [0, 0, 0, 0]  # one check a refresh
    write_deltalake(path, pa.table({"a": [2]}), mode="append")
    assert kept.table(path).version() == 1
    assert looked == [0, 0, 0, 0, 0, 1]  # checked, refreshed, stamped anew
    shutil.rmtree(path)
    write_deltalake(path, pa.table({"a": [3]}))  # made anew: version 0, another file
    assert _values(path) == [3]
    assert kept.table(path) is not first
    assert kept.table(path).to_pyarrow_table()["a"].to_pylist() == [3]
