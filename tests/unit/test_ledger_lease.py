"""The ledger lease (`ackfold.ledger.commits.lease`): one reconcile, replay or maintenance run at a
time across hosts, kept in a Delta table of the warehouse. Other processes stand in for
other hosts: the lease shares nothing with them but the table."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ackfold.config import load_settings
from ackfold.ledger.commits.lease import LedgerLease, ledger_turn
from ackfold.ledger.commits.lock import LedgerBusy, lock_path

# SIGINT is a KeyboardInterrupt even when the test run was started in the background,
# whose children inherit SIGINT ignored (the holder then slept its 120 s out).
_HOLD = """
import signal, sys, time
from datetime import timedelta
from ackfold.ledger.commits.lease import LedgerLease
signal.signal(signal.SIGINT, signal.default_int_handler)
lease = LedgerLease(sys.argv[1], ttl=timedelta(seconds=float(sys.argv[2])), host=sys.argv[3])
with lease.held("reconcile run 7"):
    print("held", flush=True)
    time.sleep(120)
"""


def holding(warehouse: Path, ttl: float = 120, host: str = "worker-3") -> subprocess.Popen[str]:
    """A run on `host` (another host, by default), holding the lease of `warehouse` until
    killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(warehouse), str(ttl), host],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_run_on_another_host_waits_names_the_holder_and_gives_up(tmp_path: Path) -> None:
    proc = holding(tmp_path)
    said: list[str] = []
    try:
        started = time.monotonic()
        with (
            pytest.raises(LedgerBusy, match=r"reconcile run 7 on \S+ \(pid \d+\) \(until "),
            LedgerLease(str(tmp_path)).held("replay", wait=1.5, say=said.append),
        ):
            pytest.fail("the lease was taken twice")
        assert time.monotonic() - started >= 1.5
        assert len(said) == 1
        assert said[0].startswith("waiting for reconcile run 7 on ")
        assert said[0].endswith(f"to release the ledger lease ({tmp_path}/_ledger_lease) ...")
    finally:
        proc.kill()
        proc.wait()


def test_a_holder_on_another_host_that_dies_frees_the_lease_once_it_expires(
    tmp_path: Path,
) -> None:
    proc = holding(tmp_path, ttl=3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lease = LedgerLease(str(tmp_path))
    assert lease.holder() == f"reconcile run 7 on worker-3 (pid {proc.pid})"
    started = time.monotonic()
    with lease.held("replay", wait=30):
        assert (lease.holder() or "").startswith("replay on ")
    assert 1 < time.monotonic() - started < 6, "free within its 3 s time to live"
    assert lease.holder() is None, "given back"


def test_a_holder_on_this_host_that_dies_frees_the_lease_at_once(tmp_path: Path) -> None:
    import socket

    proc = holding(tmp_path, host=socket.gethostname())  # its lease would last 2 minutes
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    started = time.monotonic()
    with LedgerLease(str(tmp_path)).held("replay", wait=30):
        pass
    assert time.monotonic() - started < 1, "its process is gone: no need to wait"


def test_renewals_keep_the_lease_of_a_run_longer_than_its_time_to_live(tmp_path: Path) -> None:
    long_run = LedgerLease(str(tmp_path), ttl=timedelta(seconds=2))
    with long_run.held("maintenance"):
        for _ in range(3):
            time.sleep(1.5)  # 4.5 s in all: twice the time to live
            with (
                pytest.raises(LedgerBusy, match="maintenance on "),
                LedgerLease(str(tmp_path)).held("reconcile", wait=0),
            ):
                pytest.fail("an expired lease was taken")


def test_runs_racing_for_a_free_lease_take_turns(tmp_path: Path) -> None:
    inside: list[str] = []
    overlaps: list[str] = []

    def run(name: str) -> None:
        with LedgerLease(str(tmp_path)).held(name, wait=60):
            if inside:
                overlaps.append(f"{name} entered while {inside} held it")
            inside.append(name)
            time.sleep(0.3)
            inside.remove(name)

    threads = [threading.Thread(target=run, args=(f"run {i}",)) for i in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == []


def test_a_holder_whose_lease_was_taken_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its renewals were held up past the time to live (here: another host's clock is
    an hour ahead), and another run took the lease: the first run logs an error."""
    first = LedgerLease(str(tmp_path), ttl=timedelta(seconds=1))
    ahead = LedgerLease(str(tmp_path), clock=lambda: datetime.now(UTC) + timedelta(hours=1))
    with (
        caplog.at_level(logging.ERROR, "ackfold.ledger.commits.lease"),
        first.held("reconcile"),
        ahead.held("replay", wait=0),
    ):
        time.sleep(0.6)  # two renewal ticks of the first
    [lost] = caplog.records
    assert lost.getMessage().startswith("lost the ledger lease to replay on ")


def test_a_turn_takes_this_hosts_lock_and_the_lease_and_is_reentrant(tmp_path: Path) -> None:
    settings = load_settings(var_dir=tmp_path / "var")
    lease = LedgerLease(settings.table_root)
    with ledger_turn(settings, "ackfold replay"):
        assert "ackfold replay (pid" in lock_path(settings.var_dir, settings.table_root).read_text()
        assert (lease.holder() or "").startswith("ackfold replay on ")
        with ledger_turn(settings, "replay 42", wait=0):  # the sends, inside the plan's turn
            assert (lease.holder() or "").startswith("ackfold replay on ")
    assert lease.holder() is None
    assert lock_path(settings.var_dir, settings.table_root).read_text() == ""
