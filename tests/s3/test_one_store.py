"""One store per run (issue 59): a reconcile on an S3 warehouse resolves its store (the
storage options from the environment) once, and checks the store's commit protocol (the
conditional-writes probe) once, and hands that store to the lease, the fence, the writer
and the engine, instead of each of them resolving it again. No JVM."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ackfold import LedgerWriter
from ackfold.config import load_settings
from ackfold.ledger.storage import protocol, store
from ackfold.runs.reconcile import run_reconcile
from tests.s3.conftest import warehouse_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from arrow_ledger import ArrowLedger


def _count(monkeypatch: pytest.MonkeyPatch, calls: Counter[str], module: Any, name: str) -> None:
    """Count the calls of `module.name`, wherever a module of ackfold bound it."""
    original: Callable[..., Any] = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return original(*args, **kwargs)

    for found in list(sys.modules.values()):
        if not getattr(found, "__name__", "").startswith("ackfold"):
            continue
        for bound, value in list(vars(found).items()):  # under any name (`import x as y`)
            if value is original:
                monkeypatch.setattr(found, bound, counted)


def _ledger_on_s3(bucket: str, tmp_path: Path, roots: int) -> tuple[Any, ArrowLedger]:
    """The settings of a warehouse on S3 that a producer filled with `roots` roots, through
    its own writer (and so its own store)."""
    warehouse = warehouse_of(bucket, "s3a")
    synthetic = ArrowLedger(roots=roots)
    synthetic.write(LedgerWriter(warehouse))
    return load_settings(var_dir=tmp_path, warehouse=warehouse), synthetic


def test_a_reconcile_on_s3_resolves_its_store_once_and_probes_it_once(
    bucket: str, s3_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, synthetic = _ledger_on_s3(bucket, tmp_path, roots=50)
    # Every import the run makes, made now: the counts below see every binding.
    import ackfold.engines.embedded
    import ackfold.reconcile.embedded  # noqa: F401

    calls: Counter[str] = Counter()
    for name in ("storage_options", "object_store_of", "s3_client"):
        _count(monkeypatch, calls, store, name)
    for name in ("require_conditional_writes", "probe_conditional_create"):
        _count(monkeypatch, calls, protocol, name)
    monkeypatch.setattr(protocol, "_CHECKED", set())  # as in a new process

    summary = run_reconcile(settings, now=synthetic.end + timedelta(hours=1), engine="embedded")

    expected = {status: n for status, n in synthetic.expected().items() if n}
    assert summary["by_status"] == expected
    # The store of the run: its options read from the environment once, its protocol
    # checked once (one probe: one conditional create refused), its clients made once.
    assert calls["storage_options"] == 1, calls
    assert calls["require_conditional_writes"] == 1, calls
    assert calls["probe_conditional_create"] == 1, calls
    assert calls["s3_client"] == 1, calls
    assert calls["object_store_of"] == 1, calls


def test_a_maintenance_run_on_s3_resolves_its_store_once(
    bucket: str, s3_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ackfold.maintenance import run_maintenance

    settings, _ = _ledger_on_s3(bucket, tmp_path, roots=20)
    import ackfold.engines.embedded
    import ackfold.ledger.housekeeping.maintenance  # noqa: F401

    calls: Counter[str] = Counter()
    _count(monkeypatch, calls, store, "storage_options")
    _count(monkeypatch, calls, protocol, "require_conditional_writes")
    monkeypatch.setattr(protocol, "_CHECKED", set())

    summary = run_maintenance(settings, engine="embedded")

    assert summary["engine"] == "embedded"
    assert calls["storage_options"] == 1, calls
    assert calls["require_conditional_writes"] == 1, calls
