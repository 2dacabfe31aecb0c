"""Every engine that folds the ledger, against the reference fold and against each other
(invariant 15). A test that takes `engine` runs once per engine: the embedded one in this
process, Spark on the worker's shared session (those runs join the spark tier's group).
The tables are written and read with delta-rs, as a producer outside Spark and the CLI
do, so only the reconcile itself differs between the two runs of a test."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from ackfold.config import Settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import ROOT_STATE, UNMATCHED_EVENTS, Ledger
from ackfold.runs.reconcile import run_reconcile

ENGINES = ("embedded", "spark")
Reconcile = Callable[..., dict[str, Any]]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def reconciler(request: pytest.FixtureRequest, engine: str) -> Reconcile:
    """`reconcile(settings, now=..., app=...)` on `engine`, through `run_reconcile`."""
    spark = request.getfixturevalue("spark") if engine == "spark" else None

    def reconcile(settings: Settings, *, now: datetime, app: str | None = None) -> dict[str, Any]:
        return run_reconcile(settings, now=now, app=app, engine=engine, spark=spark)

    return reconcile


@pytest.fixture
def reconcile(request: pytest.FixtureRequest, engine: str) -> Reconcile:
    return reconciler(request, engine)


def append(ledger: Ledger, table: str, rows: Iterable[Mapping[str, Any]]) -> None:
    """Append `rows` to `table` in one commit, duplicates and all (`LedgerWriter.append`
    would drop repeated event ids: these tests need the copies)."""
    writer = LedgerWriter(ledger.root)
    writer.create()
    data = list(rows)
    if data:
        schema = pa.schema(DeltaTable(ledger.path(table)).schema().to_arrow())
        columns = {f.name: [row.get(f.name) for row in data] for f in schema}
        writer.append_arrow(table, pa.table(columns, schema=schema))


def read(ledger: Ledger, table: str) -> list[dict[str, Any]]:
    if not DeltaTable.is_deltatable(ledger.path(table)):
        return []
    return pa.table(DeltaTable(ledger.path(table)).to_pyarrow_dataset().to_table()).to_pylist()


def state(ledger: Ledger) -> dict[int, dict[str, Any]]:
    """root_state by root id."""
    return {row["root_id"]: row for row in read(ledger, ROOT_STATE)}


def waiting(ledger: Ledger) -> list[dict[str, Any]]:
    return read(ledger, UNMATCHED_EVENTS)


def set_status(ledger: Ledger, value: str) -> None:
    """Every root_state row to status `value`, as the replay's bookkeeping would."""
    rows = read(ledger, ROOT_STATE)
    table = DeltaTable(ledger.path(ROOT_STATE))
    schema = pa.schema(table.schema().to_arrow())
    updated = pa.Table.from_pylist([{**row, "status": value} for row in rows], schema=schema)
    from deltalake import write_deltalake

    write_deltalake(table, updated, mode="overwrite")
