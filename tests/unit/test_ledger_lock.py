"""The ledger lock serializes writers across processes, names its holder, and dies with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ackfold.ledger.commits.lock import (
    AppBusy,
    LedgerBusy,
    app_lock,
    app_lock_path,
    ledger_lock,
    lock_path,
    warehouse_digest,
)

WH = "s3://bucket/warehouse"
OTHER = "s3://bucket/another-warehouse"

_HOLD = """
import sys, time
from pathlib import Path
from ackfold.ledger.commits.lock import ledger_lock
with ledger_lock(Path(sys.argv[1]), sys.argv[2], "reconcile run 7"):
    print("held", flush=True)
    time.sleep(60)
"""


def _holder(var: Path, warehouse: str = WH) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(var), warehouse], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_waits_names_the_holder_and_gives_up(tmp_path: Path) -> None:
    proc = _holder(tmp_path)
    said: list[str] = []
    try:
        started = time.monotonic()
        busy = pytest.raises(LedgerBusy, match=r"reconcile run 7 \(pid \d+\) has held")
        with busy, ledger_lock(tmp_path, WH, "replay", wait=1.0, say=said.append):
            pytest.fail("the lock was taken twice")
        assert time.monotonic() - started >= 1.0
        assert len(said) == 1
        assert "waiting for reconcile run 7" in said[0]
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    proc = _holder(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with ledger_lock(tmp_path, WH, "replay", wait=5.0):
        assert "replay (pid" in lock_path(tmp_path, WH).read_text()
    assert lock_path(tmp_path, WH).read_text() == ""


def test_the_lock_is_reentrant_within_a_thread(tmp_path: Path) -> None:
    with ledger_lock(tmp_path, WH, "reconcile"), ledger_lock(tmp_path, WH, "replay", wait=0.1):
        assert "reconcile" in lock_path(tmp_path, WH).read_text()


def test_an_error_inside_the_block_releases_the_lock(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), ledger_lock(tmp_path, WH, "reconcile"):
        raise RuntimeError("boom")
    with ledger_lock(tmp_path, WH, "replay", wait=0.1):
        assert "replay" in lock_path(tmp_path, WH).read_text()


def test_two_threads_of_one_process_take_turns(tmp_path: Path) -> None:
    inside: list[str] = []
    overlaps: list[str] = []

    def work(name: str) -> None:
        with ledger_lock(tmp_path, WH, name, wait=10):
            if inside:
                overlaps.append(f"{name} entered while {inside} held it")
            inside.append(name)
            time.sleep(0.3)
            inside.remove(name)

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == []


def test_an_apps_lock_has_one_driver_and_is_apart_from_the_ledger_and_other_apps(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    with app_lock(tmp_path, WH, "wordcount", "ackfold demo"):
        busy = pytest.raises(AppBusy, match=r"the app wordcount is busy: ackfold demo \(pid")
        with busy, app_lock(tmp_path, WH, "wordcount", "a DAG run", wait=0.3, say=said.append):
            pytest.fail("the app's lock was taken twice")
        assert said == [
            f"waiting for ackfold demo (pid {os.getpid()}) to release the app wordcount "
            f"({app_lock_path(tmp_path, WH, 'wordcount')}) ..."
        ]
        with (
            ledger_lock(tmp_path, WH, "reconcile", wait=0.1),
            app_lock(tmp_path, WH, "orders", "x"),
        ):
            pass
    with app_lock(tmp_path, WH, "wordcount", "a DAG run", wait=0.1):
        assert "a DAG run" in app_lock_path(tmp_path, WH, "wordcount").read_text()


def test_independent_warehouses_never_wait_for_each_other(tmp_path: Path) -> None:
    # Another process holds the ledger lock of one warehouse on this host.
    proc = _holder(tmp_path, WH)
    try:
        said: list[str] = []
        # Another warehouse: taken at once (wait=0 would raise LedgerBusy on any wait).
        with ledger_lock(tmp_path, OTHER, "reconcile of another", wait=0, say=said.append):
            assert "reconcile of another" in lock_path(tmp_path, OTHER).read_text()
        assert said == []
        # The same warehouse, however it is spelled, still excludes.
        for spelling in (WH, WH + "/", "S3://bucket/warehouse"):
            busy = pytest.raises(LedgerBusy, match=r"reconcile run 7 \(pid \d+\) has held")
            with busy, ledger_lock(tmp_path, spelling, "replay", wait=0):
                pytest.fail("the lock of one warehouse was taken twice")
    finally:
        proc.kill()
        proc.wait()
    with app_lock(tmp_path, WH, "wordcount", "ackfold demo"):
        with app_lock(tmp_path, OTHER, "wordcount", "another demo", wait=0):
            pass
        busy_app = pytest.raises(AppBusy)
        with busy_app, app_lock(tmp_path, WH, "wordcount", "a DAG run", wait=0):
            pytest.fail("the app's lock was taken twice")


def test_a_local_warehouse_is_one_lock_however_it_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wh").mkdir()
    spellings = ["wh", "./wh/", str(tmp_path / "wh"), f"file://{tmp_path}/wh"]
    assert len({warehouse_digest(s) for s in spellings}) == 1
    assert warehouse_digest(str(tmp_path / "wh2")) != warehouse_digest("wh")
    assert lock_path(tmp_path, "wh").name == f"ledger-{warehouse_digest('wh')}.lock"
