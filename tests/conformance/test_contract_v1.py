"""A ledger that a contract-v1 producer wrote with delta-rs alone (no `id_scheme`,
`tests/contract_v1.py`) folds to its exact statuses (invariants 15 and 18); the reconcile
commits nothing to `roots` or `ack_events`, and the producer's plain appends go on after
it.

On the embedded engine only: Spark folds a contract-v1 ledger in `test_golden.py`'s case
`contract-v1` (the same four statuses, `roots` and `ack_events` at their versions, a
producer's append folded after it, and the replay's dry run and quality checks besides);
Spark's summary and `fail_reason` are `test_reconcile.py`'s. A second Spark run here cost
about 40 CPU-seconds and proved nothing more.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from ackfold.config import load_settings
from ackfold.ledger.schema.tables import Ledger
from tests.conformance.conftest import Reconcile, state
from tests.conftest import JARS_DIR
from tests.contract_v1 import STATUSES, V1_ROOTS, now_utc, produce, write_v1_ledger


def _layout(ledger: Ledger) -> dict[str, tuple[int, list[str]]]:
    tables = {name: DeltaTable(ledger.path(name)) for name in ("roots", "ack_events")}
    return {n: (t.version(), [f.name for f in t.schema().fields]) for n, t in tables.items()}


@pytest.mark.parametrize("engine", ["embedded"])
def test_a_contract_v1_ledger_folds_to_its_statuses(
    engine: str, reconcile: Reconcile, tmp_path: Path
) -> None:
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    ledger = Ledger(settings.table_root)
    warehouse, now = Path(ledger.root), now_utc()
    write_v1_ledger(warehouse, now)
    before = _layout(ledger)

    summary = reconcile(settings, now=now)

    assert summary["by_status"] == {"completed": 1, "failed": 1, "timed_out": 1, "pending": 1}
    assert {root: row["status"] for root, row in state(ledger).items()} == STATUSES
    assert state(ledger)[2]["fail_reason"] == "bad order"
    assert _layout(ledger) == before
    assert before["roots"][1] == V1_ROOTS
    produce(warehouse, 100, now)  # the producer's plain append, unchanged
    reconcile(settings, now=now)
    assert state(ledger)[100]["status"] == "completed"
    assert _layout(ledger)["roots"][1] == V1_ROOTS
