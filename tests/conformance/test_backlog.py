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

import pytest

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import ROOT_STATE, Ledger
from ackfold.runs.reconcile import run_reconcile
from tests.conformance.conftest import state, waiting

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from arrow_ledger import ArrowLedger


def _ledger(var: Path, synthetic: ArrowLedger, **overrides: Any) -> Settings:
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


def _killed_between_files_and_commit(
    var: Path, synthetic: ArrowLedger, now: str
) -> Settings | None:
    """Start a reconcile of a new ledger in `var` and SIGKILL it once root_state's first data
    file is there: the ledger's settings if the kill came before the commit, else None.
    (A busy machine may not run this process again until after the commit, or after the
    run's end: a lost race, not a failure. A run that wrote no data file fails the test.)"""
    settings = _ledger(var, synthetic)
    root_state = Path(settings.table_root) / ROOT_STATE
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "ackfold"), "reconcile", "--now", now],
        env={**os.environ, "ACKFOLD_VAR_DIR": str(var)},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # delta-rs writes root_state's data files, then commits: kill in between.
        deadline = time.monotonic() + 300
        while not _data_files(root_state) and time.monotonic() < deadline:
            if proc.poll() is not None:  # it ran to its end: a lost race too, said below
                break
            time.sleep(0.002)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert _data_files(root_state), "the write never started"
    return settings if state(Ledger(settings.table_root)) == {} else None


def test_killed_in_the_middle_of_its_writes_then_rerun_equals_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    synthetic = ArrowLedger(roots=150_000)
    now = synthetic.end + timedelta(hours=1)
    tries = 5
    for n in range(tries):
        settings = _killed_between_files_and_commit(
            tmp_path / f"killed-{n}", synthetic, now.isoformat()
        )
        if settings is not None:
            break
    else:
        pytest.fail(f"each of {tries} writes committed before its kill")
    clean = _ledger(tmp_path / "clean", synthetic)

    rerun = run_reconcile(settings, now=now, engine="embedded")
    uninterrupted = run_reconcile(clean, now=now, engine="embedded")
    assert rerun["by_status"] == uninterrupted["by_status"] == synthetic.expected()
    assert _without_hash_order(state(Ledger(settings.table_root))) == _without_hash_order(
        state(Ledger(clean.table_root))
    )
