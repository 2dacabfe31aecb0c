"""The producer test vectors (`docs/ledger/test-vectors.json`) as the tests read them: the
file, its generator (`scripts/ledger_vectors.py`), and its ledgers as rows to append.
Shared by tests/unit/test_ledger_vectors.py and tests/spark/test_ledger_vectors.py."""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
VECTORS = PROJECT / "docs" / "ledger" / "test-vectors.json"
GENERATOR = PROJECT / "scripts" / "ledger_vectors.py"
# The columns whose values the file holds as text: 64-bit ints.
INT64_COLUMNS = ("root_id", "origin_root_id", "ack_val")


@cache
def vectors() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(VECTORS.read_text(encoding="utf-8"))
    return loaded


def generator() -> ModuleType:
    """`scripts/ledger_vectors.py`, imported from its path (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("ledger_vectors", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ledger_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of a vector ledger as a writer appends it: ints and times as Python's."""
    out = dict(row)
    for name in INT64_COLUMNS:
        if out.get(name) is not None:
            out[name] = int(out[name])
    for name in ("event_time", "ingested_at"):
        if name in out:
            out[name] = datetime.fromisoformat(out[name])
    return out


def all_ledgers() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, str]]:
    """Every vector ledger's roots and events (their root ids are distinct), and the
    status each root must fold to."""
    roots, events, statuses = [], [], {}
    for case in vectors()["ledgers"]["cases"]:
        roots += [ledger_row(r) for r in case["roots"]]
        events += [ledger_row(e) for e in case["events"]]
        statuses.update({int(r): s for r, s in case["statuses"].items()})
    return roots, events, statuses


def now() -> datetime:
    """The time the ledgers' statuses are as of."""
    return datetime.fromisoformat(vectors()["ledgers"]["now"])
