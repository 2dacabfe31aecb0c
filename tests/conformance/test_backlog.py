"""A backlog folded in slices, and a run killed in the middle of its writes, end where one
uninterrupted run ends (the embedded engine; the Spark engine's kill test is in
tests/spark/test_reconcile_kill.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import ROOT_STATE, Ledger
from ackfold.runs.reconcile import run_reconcile
from tests.conformance.conftest import state, waiting

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from arrow_ledger import ArrowLedger


def _ledger(var: Path, synthetic: ArrowLedger, **overrides: Any) -> Any:
    settings = load_settings(var_dir=var, **overrides)
    LedgerWriter(settings.table_root).create()
    synthetic.write(LedgerWriter(settings.table_root))
    return settings


def _without_hash_order(rows: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    cleaned = {}
    for root, row in rows.items():
        row = dict(row)
        row["seen_event_hashes"] = sorted(row["seen_event_hashes"])
        row.pop("reconciled_at")  # the same `now`, but a re-run may have written it
        cleaned[root] = row
    return cleaned


def test_a_backlog_folded_in_slices_ends_as_one_slice(tmp_path: Path) -> None:
    # Written in 4 commits of 2 slices each: small enough slices read them one at a time.
    synthetic = ArrowLedger(roots=4_000, first_root=0)
    now = synthetic.end + timedelta(hours=1)
    whole = _ledger(tmp_path / "whole", synthetic)
    sliced = _ledger(tmp_path / "sliced", synthetic, reconcile={"max_bytes_per_batch": "1k"})
    for extra in (ArrowLedger(roots=2_000, first_root=4_000, seed=9),):
        extra.write(LedgerWriter(whole.table_root))
        extra.write(LedgerWriter(sliced.table_root))

    one = run_reconcile(whole, now=now, engine="embedded")
    many = run_reconcile(sliced, now=now, engine="embedded")
    assert one["by_status"] == many["by_status"]
    assert _without_hash_order(state(Ledger(whole.table_root))) == _without_hash_order(
        state(Ledger(sliced.table_root))
    )
    assert waiting(Ledger(sliced.table_root)) == []


def _data_files(table: Path) -> set[Path]:
    return set(table.rglob("*.parquet"))


def test_killed_in_the_middle_of_its_writes_then_rerun_equals_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    synthetic = ArrowLedger(roots=150_000)
    now = (synthetic.end + timedelta(hours=1)).isoformat()
    killed = _ledger(tmp_path / "killed", synthetic)
    clean = _ledger(tmp_path / "clean", synthetic)
    root_state = Path(killed.table_root) / ROOT_STATE
    env = {**os.environ, "ACKFOLD_VAR_DIR": str(tmp_path / "killed")}
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "ackfold"), "reconcile", "--now", now],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # delta-rs writes root_state's data files, then commits: kill in between.
        deadline = time.monotonic() + 300
        while not _data_files(root_state) and time.monotonic() < deadline:
            assert proc.poll() is None, "the reconcile ended before its write was caught"
            time.sleep(0.002)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert _data_files(root_state), "the write never started"
    assert state(Ledger(killed.table_root)) == {}, "the write committed before the kill"

    rerun = run_reconcile(killed, now=synthetic.end + timedelta(hours=1), engine="embedded")
    uninterrupted = run_reconcile(clean, now=synthetic.end + timedelta(hours=1), engine="embedded")
    assert rerun["by_status"] == uninterrupted["by_status"] == synthetic.expected()
    assert _without_hash_order(state(Ledger(killed.table_root))) == _without_hash_order(
        state(Ledger(clean.table_root))
    )
