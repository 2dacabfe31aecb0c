"""The fence (`ackfold.ledger.commits.fence`) on delta-rs commits: a run of an older lease epoch
commits nothing once a newer one has claimed the table, whether its snapshot is from
after the claim (refused before it is tried) or from before (Delta's conflict check fails
it, the retry refuses it); a commit whose answer was lost is not made twice; each take of
the lease draws the next epoch."""

from __future__ import annotations

import doctest
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold.ledger.commits import fence as fence_module
from ackfold.ledger.commits.fence import FENCE_APP, STRIDE, Fence, commit, holding, spark_commit
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.errors import FenceUnreadable, LeaseLost, Unfenced


def _table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"a": [0]}))
    return path


def _append(value: int) -> Any:
    def append(table: Any, properties: Any) -> None:
        write_deltalake(
            table, pa.table({"a": [value]}), mode="append", commit_properties=properties
        )

    return append


def _values(path: str) -> list[int]:
    return sorted(DeltaTable(path).to_pyarrow_table()["a"].to_pylist())


def test_an_older_epoch_is_refused_after_a_newer_claim(tmp_path: Path) -> None:
    path = _table(tmp_path)
    old, new = Fence(str(tmp_path), epoch=4), Fence(str(tmp_path), epoch=5)
    old.commit(path, _append(1))
    new.claim([path])
    with pytest.raises(LeaseLost, match=r"lease epoch 5 \(this run's is 4\)"):
        old.commit(path, _append(2))
    new.commit(path, _append(3))
    assert _values(path) == [0, 1, 3]
    held = DeltaTable(path).transaction_version(FENCE_APP)
    assert held is not None
    assert held // STRIDE == 5


def test_a_commit_begun_before_the_claim_fails_when_it_lands_after(tmp_path: Path) -> None:
    """The frozen run read the table, then the new run claimed it, then the frozen run
    commits from its old snapshot: delta-rs's conflict check fails it (both name the app
    id `ackfold.lease`), and the retry, on a fresh snapshot, refuses it."""
    path = _table(tmp_path)
    old, new = Fence(str(tmp_path), epoch=4), Fence(str(tmp_path), epoch=5)
    snapshot = DeltaTable(path)  # read before the claim
    new.claim([path])
    reads = [snapshot]

    def load() -> Any:
        return reads.pop() if reads else DeltaTable(path)

    with pytest.raises(LeaseLost, match="epoch 5"):
        old.commit(path, _append(2), load=load)
    assert reads == [], "the first try was made on the old snapshot"
    assert _values(path) == [0]


def test_a_commit_that_landed_before_its_answer_was_lost_is_not_made_again(
    tmp_path: Path,
) -> None:
    path = _table(tmp_path)
    run = Fence(str(tmp_path), epoch=2)
    tries = []

    def append_then_lose_the_answer(table: Any, properties: Any) -> None:
        tries.append(1)
        _append(7)(table, properties)
        if len(tries) == 1:  # the store restarted before it answered
            raise type("CommitFailedError", (Exception,), {})("connection reset")

    assert run.commit(path, append_then_lose_the_answer) is None
    assert (len(tries), _values(path)) == (1, [0, 7])


def test_a_lost_or_expired_lease_commits_nothing(tmp_path: Path) -> None:
    path = _table(tmp_path)
    lost = Fence(str(tmp_path), epoch=3)
    lost.lose("taken by reconcile on worker-2")
    with pytest.raises(LeaseLost, match="taken by reconcile on worker-2"):
        lost.commit(path, _append(1))
    expired = Fence(str(tmp_path), epoch=3, expired=lambda: True)
    with pytest.raises(LeaseLost, match="could not renew"):
        expired.commit(path, _append(1))
    assert _values(path) == [0]


def test_a_run_whose_lease_was_taken_commits_nothing_though_the_taker_wrote_nothing(
    tmp_path: Path,
) -> None:
    """Found by the soak: the run that took over found nothing to do (a quiet reconcile)
    and claimed no table, so no table holds its epoch; the lease itself does."""
    path = _table(tmp_path)
    lease = LedgerLease(str(tmp_path))
    ahead = LedgerLease(str(tmp_path), clock=lambda: datetime.now(UTC) + timedelta(hours=1))
    with lease.held("a run that freezes") as frozen:
        frozen.commit(path, _append(1))
        with ahead.held("another host, with nothing to do"):
            pass
        with pytest.raises(LeaseLost, match=r"to a newer run \(lease epoch 2\)"):
            frozen.commit(path, _append(2))
    assert _values(path) == [0, 1]


def test_outside_a_turn_a_commit_raises_and_inside_it_is_fenced(tmp_path: Path) -> None:
    """Issue 55: a commit with no fence in force used to be made unfenced; it raises."""
    path = _table(tmp_path)
    with pytest.raises(Unfenced, match="holds no turn of the ledger"):
        commit(str(tmp_path), path, _append(1), what="a library call")
    with pytest.raises(Unfenced, match="holds no turn of the ledger"):
        spark_commit(str(tmp_path), path, lambda txn: None, what="a library call")
    assert DeltaTable(path).transaction_version(FENCE_APP) is None
    assert _values(path) == [0]
    with holding(Fence(str(tmp_path), epoch=9)):
        commit(str(tmp_path), path, _append(2), what="a leased run's")
    assert DeltaTable(path).transaction_version(FENCE_APP) == 9 * STRIDE + 1


def test_a_claim_that_cannot_read_a_table_stops_the_run(tmp_path: Path) -> None:
    """Issue 55: a claim passed over any table it could not read (a 503, a corrupt log)
    as if it did not exist, and the run went on unclaimed. Only a missing table is
    passed over; any other read error stops the run, and nothing is committed."""
    path = _table(tmp_path)
    missing = str(tmp_path / "not_made_yet")
    (Path(path) / "_delta_log" / "00000000000000000001.json").write_text("{not json\n")
    run = Fence(str(tmp_path), epoch=5)
    with pytest.raises(FenceUnreadable, match=r"claim of .*/t could not read"):
        run.claim([missing, path])
    assert not Path(missing).exists()
    assert sorted(p.name for p in (Path(path) / "_delta_log").glob("*.json")) == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]
    run.claim([missing])  # a table not made yet is no error: there is nothing to fence


def test_each_take_of_the_lease_draws_the_next_epoch(tmp_path: Path) -> None:
    lease = LedgerLease(str(tmp_path))
    with lease.held("reconcile") as first:
        pass
    with lease.held("replay") as second:
        pass
    ahead = LedgerLease(str(tmp_path), clock=lambda: datetime.now(UTC) + timedelta(hours=1))
    with lease.held("a run that freezes") as frozen, ahead.held("another host") as taken:
        assert taken.epoch == frozen.epoch + 1, "an expired holder's lease is taken anew"
    assert (first.epoch, second.epoch, frozen.epoch) == (1, 2, 3)


def test_doctests() -> None:
    assert doctest.testmod(fence_module).failed == 0
