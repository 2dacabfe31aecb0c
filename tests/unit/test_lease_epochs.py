"""The lease across time (issue 55): a lease table that was lost does not restart its
epochs, and during a rolling upgrade a host of an earlier release cannot take the lease
(it waits, names the release it needs, and gives up), nor a host of this release a lease
kept by a later one.

The earlier release is the real one: this repository's code at 7161c90 (before issue 55),
taken with `git archive` and run in a subprocess."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold.ledger.commits.fence import FENCE_APP, STRIDE
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.commits.lease_record import MIN_RELEASE
from ackfold.ledger.errors import LeaseTooNew, LedgerBusy
from ackfold.ledger.schema.tables import LEASE, ROOT_STATE, Ledger

REPO = Path(__file__).resolve().parents[2]
EARLIER = "7161c90"  # main before issue 55: lease format 1


def _append(value: int) -> object:
    def append(table: object, properties: object) -> None:
        write_deltalake(
            table,  # type: ignore[arg-type]
            pa.table({"a": [value]}),
            mode="append",
            commit_properties=properties,  # type: ignore[arg-type]
        )

    return append


def test_a_lost_lease_table_goes_on_from_the_highest_epoch_the_tables_hold(
    tmp_path: Path,
) -> None:
    """Three runs commit to root_state (epochs 1-3); then the lease table is deleted. The
    next run must draw epoch 4: with epoch 1 its own fence refused every commit it made,
    and every run's after it, until someone repaired the lease by hand."""
    warehouse = str(tmp_path)
    state = Ledger(warehouse).path(ROOT_STATE)
    write_deltalake(state, pa.table({"a": [0]}))
    for n in range(3):
        with LedgerLease(warehouse).held(f"run {n}") as fence:
            fence.commit(state, _append(n + 1))  # type: ignore[arg-type]
    shutil.rmtree(tmp_path / LEASE)
    with LedgerLease(warehouse).held("the run after the loss") as fence:
        assert fence.epoch == 4
        fence.commit(state, _append(9))  # type: ignore[arg-type]
    assert DeltaTable(state).transaction_version(FENCE_APP) == 4 * STRIDE + 1
    assert sorted(DeltaTable(state).to_pyarrow_table()["a"].to_pylist()) == [0, 1, 2, 3, 9]


@pytest.fixture(scope="module")
def earlier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The earlier release's `include/` (ackfold at `EARLIER`)."""
    where = tmp_path_factory.mktemp("earlier")
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", EARLIER, "include/ackfold"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the earlier release's code is not in this checkout ({exc})")
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    return where / "include"


# The earlier release's own module path, from before the ledger had rooms. Spelled in
# parts so that no rewrite of this release's paths reaches it.
EARLIER_LEASE = ".".join(("ackfold", "ledger", "lease"))


def _earlier_takes(earlier: Path, warehouse: str) -> str:
    """What the earlier release says when it tries to take the lease at once."""
    script = textwrap.dedent(f"""
        import os, sys
        from {EARLIER_LEASE} import LedgerLease
        from ackfold.ledger.errors import LedgerBusy
        try:
            with LedgerLease({warehouse!r}).held("an earlier release", wait=0) as fence:
                print("TOOK epoch", fence.epoch)
        except LedgerBusy as busy:
            print("BUSY", busy)
        sys.stdout.flush()
        os._exit(0)  # delta-rs may abort at interpreter exit
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={"PYTHONPATH": str(earlier), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert done.stdout.startswith(("TOOK", "BUSY")), done.stderr
    return done.stdout.strip()


def test_an_earlier_release_cannot_take_a_lease_this_one_kept(
    tmp_path: Path, earlier: Path
) -> None:
    """Before issue 55 an earlier host took the lease beside this release's hosts, without
    the fence. Now it finds the lease held, for ever, by a holder that names the release
    it needs, and gives up without a commit."""
    warehouse = str(tmp_path)
    assert _earlier_takes(earlier, warehouse) == "TOOK epoch 1", "a ledger it made itself"
    with LedgerLease(warehouse).held("this release") as fence:
        assert fence.epoch == 2, "this release goes on from the earlier one's epoch"
    version = DeltaTable(str(tmp_path / LEASE)).version()
    said = _earlier_takes(earlier, warehouse)
    assert said.startswith("BUSY"), said
    assert f"ackfold {MIN_RELEASE} or later" in said
    assert "upgrade it" in said
    assert DeltaTable(str(tmp_path / LEASE)).version() == version, "the earlier host committed"
    with LedgerLease(warehouse).held("this release again") as fence:
        assert fence.epoch == 3


def test_a_live_holder_of_an_earlier_release_is_waited_for(tmp_path: Path, earlier: Path) -> None:
    """Mid-upgrade: an earlier release holds the lease. This release waits for it."""
    warehouse = str(tmp_path)
    script = textwrap.dedent(f"""
        import os, sys, time
        from {EARLIER_LEASE} import LedgerLease
        with LedgerLease({warehouse!r}, host="old-host").held("an earlier reconcile"):
            print("HOLDING", flush=True)
            sys.stdin.readline()
        sys.stdout.flush()
        os._exit(0)
    """)
    holder = subprocess.Popen(
        [sys.executable, "-c", script],
        env={"PYTHONPATH": str(earlier), "PATH": "/usr/bin:/bin"},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "HOLDING"
        busy = pytest.raises(LedgerBusy, match="an earlier reconcile on old-host")
        with busy, LedgerLease(warehouse).held("this release", wait=0):
            pass
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=120)
    with LedgerLease(warehouse).held("this release") as fence:
        assert fence.epoch == 2


def test_a_lease_kept_by_a_later_release_is_refused_naming_it(tmp_path: Path) -> None:
    warehouse = str(tmp_path)
    with LedgerLease(warehouse).held("this release"):
        pass
    DeltaTable(str(tmp_path / LEASE)).alter.set_table_properties(
        {"ackfold.lease.format": "3", "ackfold.lease.minRelease": "0.9.0"},
        raise_if_not_exists=False,
    )
    refused = pytest.raises(LeaseTooNew, match=r"by ackfold 0\.9\.0 or later .*upgrade ackfold")
    with refused, LedgerLease(warehouse).held("this release", wait=0):
        pass
