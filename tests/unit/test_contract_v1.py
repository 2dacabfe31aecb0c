"""The contract is a promise over time (invariant 18), on the embedded engine: a ledger
that a contract-v1 producer wrote with delta-rs alone (`tests/contract_v1.py`) reconciles
with exact statuses, its producer appends unchanged before and after every ackfold
command, and no command commits to `roots` or `ack_events` or changes their schema;
only `ackfold upgrade` adds the optional columns."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold import LedgerWriter, Tracker
from ackfold.cli import main as cli
from ackfold.config import load_settings
from ackfold.embedded import tables
from ackfold.embedded.duck import connect
from ackfold.ledger.errors import SchemaMismatch
from ackfold.ledger.schema import schemes
from tests.contract_v1 import (
    APP,
    STATUSES,
    V1_ROOTS,
    now_utc,
    produce,
    with_id_scheme_files,
    write_v1_ledger,
)

CONTRACT = ("roots", "ack_events")


@pytest.fixture(autouse=True)
def _var_dir(clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("ACKFOLD_ENGINE__KIND", "embedded")


def _warehouse(tmp_path: Path) -> Path:
    return tmp_path / "var" / "warehouse"


def _layout(warehouse: Path) -> dict[str, tuple[int, list[str]]]:
    """The Delta version and column names of each contract table."""
    out = {}
    for name in CONTRACT:
        table = DeltaTable(str(warehouse / name))
        out[name] = (table.version(), [f.name for f in table.schema().fields])
    return out


def _statuses(warehouse: Path) -> dict[int, str]:
    rows = DeltaTable(str(warehouse / "root_state")).to_pyarrow_table(columns=["root_id", "status"])
    return {row["root_id"]: row["status"] for row in rows.to_pylist()}


def _run(*argv: str) -> int:
    return cli.run(list(argv))


def test_a_v1_ledger_reconciles_and_no_command_touches_roots_or_ack_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse, now = _warehouse(tmp_path), now_utc()
    write_v1_ledger(warehouse, now)
    next_root = iter(range(100, 200))
    commands: list[tuple[str, ...]] = [
        ("init",),
        ("reconcile",),
        ("replay", "--dry-run"),
        ("replay", "--dry-run", "--status", "dead_lettered"),  # nothing to replay
        ("roots",),
        ("show", "1"),
        ("quality",),
        ("outputs",),
        ("retract",),  # a dry run: no dead letter here
        ("retract", "--yes"),
        ("maintain", "--dry-run"),
        ("reconcile",),
    ]
    for argv in commands:
        produce(warehouse, next(next_root), now)  # before
        before = _layout(warehouse)
        code = _run(*argv)
        out = capsys.readouterr()
        assert code in (0, 1), (argv, out.err)  # quality: 1 while roots are unsettled
        assert "Traceback" not in out.err, (argv, out.err)
        assert _layout(warehouse) == before, argv  # no commit to roots or ack_events
        produce(warehouse, next(next_root), now)  # after: the same plain append
    assert _layout(warehouse)["roots"][1] == V1_ROOTS
    statuses = _statuses(warehouse)
    assert {r: statuses[r] for r in STATUSES} == STATUSES
    # The producer's roots completed (the last one's after the last reconcile: unknown).
    assert {statuses[r] for r in range(100, 115)} == {"completed"}


def test_reconcile_gives_the_exact_statuses_through_run_reconcile(tmp_path: Path) -> None:
    from ackfold.runs.reconcile import run_reconcile

    warehouse, now = _warehouse(tmp_path), now_utc()
    write_v1_ledger(warehouse, now)
    settings = load_settings(var_dir=tmp_path / "var")
    summary = run_reconcile(settings, now=now)
    assert summary["by_status"] == {"completed": 1, "failed": 1, "timed_out": 1, "pending": 1}
    assert _statuses(warehouse) == STATUSES
    reasons = DeltaTable(str(warehouse / "root_state")).to_pyarrow_table(
        columns=["root_id", "fail_reason"]
    )
    assert {r["root_id"]: r["fail_reason"] for r in reasons.to_pylist()}[2] == "bad order"


def test_files_with_and_without_id_scheme_read_as_one_table(tmp_path: Path) -> None:
    warehouse, now = _warehouse(tmp_path), now_utc()
    write_v1_ledger(warehouse, now)
    with_id_scheme_files(warehouse, now)
    db = connect(load_settings(var_dir=tmp_path / "var"))
    try:
        uri = str(warehouse / "roots")
        rows = tables.scan(db, uri, columns=["root_id", "id_scheme"]).fetchall()
        assert sorted(rows) == [(1, None), (2, None), (3, None), (4, None), (5, 1)]
    finally:
        db.close()
    assert _run("reconcile") == 0
    assert _statuses(warehouse) == {**STATUSES, 5: "completed"}


def test_a_v1_table_reads_id_scheme_as_null_in_scan_and_scan_files(tmp_path: Path) -> None:
    from ackfold.embedded.log import DataFile
    from ackfold.ledger.schema.contract import arrow_schema

    warehouse = _warehouse(tmp_path)
    write_v1_ledger(warehouse, now_utc())
    uri = str(warehouse / "roots")
    db = connect(load_settings(var_dir=tmp_path / "var"))
    try:
        got = tables.scan(db, uri, columns=["root_id", "id_scheme"]).fetchall()
        assert sorted(got) == [(1, None), (2, None), (3, None), (4, None)]
        files = [DataFile(uri=u, size=0, version=0) for u in DeltaTable(uri).file_uris()]
        rel = tables.scan_files(db, files, arrow_schema("roots"))
        assert rel.columns[-1] == "id_scheme"
        assert [r[-1] for r in rel.fetchall()] == [None] * 4
    finally:
        db.close()


def test_upgrade_adds_the_column_once_and_says_what_delta_rs_then_wants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse, now = _warehouse(tmp_path), now_utc()
    write_v1_ledger(warehouse, now)
    before = _layout(warehouse)
    assert _run("upgrade") == 0
    assert capsys.readouterr().out.splitlines() == [f"added {warehouse}/roots: id_scheme INT"]
    after = _layout(warehouse)
    assert after["roots"] == (before["roots"][0] + 1, [*V1_ROOTS, "id_scheme"])
    assert after["ack_events"] == before["ack_events"]
    # The table's schema has the column now, none of its files do: read as nulls.
    db = connect(load_settings(var_dir=tmp_path / "var"))
    try:
        got = tables.scan(db, str(warehouse / "roots"), columns=["root_id", "id_scheme"])
        assert sorted(got.fetchall()) == [(1, None), (2, None), (3, None), (4, None)]
    finally:
        db.close()
    assert _run("upgrade") == 0  # idempotent
    assert capsys.readouterr().out.splitlines() == [f"up to date: {warehouse} (nothing added)"]
    assert _layout(warehouse) == after
    # What docs/ledger.md says: a plain v1 append now fails, one with schema_mode="merge"
    # goes in, its rows null in the new column; and the ledger reconciles as before.
    with pytest.raises(Exception, match="number of fields does not match: 10 vs 11"):
        produce(warehouse, 100, now)
    from tests.contract_v1 import roots

    write_deltalake(warehouse / "roots", roots([101], now), mode="append", schema_mode="merge")
    stored = DeltaTable(str(warehouse / "roots")).to_pyarrow_table(columns=["root_id", "id_scheme"])
    assert {r["root_id"]: r["id_scheme"] for r in stored.to_pylist()}[101] is None
    assert _layout(warehouse)["roots"][1] == [*V1_ROOTS, "id_scheme"]
    assert _run("reconcile") == 0
    assert {r: s for r, s in _statuses(warehouse).items() if r in STATUSES} == STATUSES


def test_the_writer_registers_text_roots_into_a_v1_table_and_refuses_numeric_ones(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse, now = _warehouse(tmp_path), now_utc()
    write_v1_ledger(warehouse, now)
    before = _layout(warehouse)
    writer = LedgerWriter(warehouse)

    numeric = Tracker(APP)
    numeric.ack(numeric.spout("n-1", source="sqs", source_queue="q"), stage="store")
    with pytest.raises(SchemaMismatch, match="ackfold upgrade") as refused:
        writer.append(numeric.drain_roots(), numeric.drain())
    assert "has no id_scheme column" in str(refused.value)
    assert _layout(warehouse) == before  # nothing written: neither roots nor events

    with caplog.at_level(logging.WARNING, logger="ackfold.ledger.setup.upgrade"):
        tracker = Tracker(APP, ledger=writer)
    assert tracker.id_scheme == schemes.TEXT
    assert [r.getMessage() for r in caplog.records if "ackfold upgrade" in r.getMessage()]
    first = tracker.spout("t-1", source="sqs", source_queue="q")
    tracker.ack(first, stage="store")
    appended = writer.append(tracker.drain_roots(), tracker.drain(), app_id="p", version=1)
    assert (appended.roots, appended.events) == (1, 2)
    assert _layout(warehouse)["roots"][1] == V1_ROOTS  # the table stays v1
    assert writer.append(tracker.drain_roots(), tracker.drain(), app_id="p", version=1)
    assert _run("reconcile") == 0
    assert _statuses(warehouse)[first.roots[0]] == "completed"

    # An explicit Arrow append of numeric roots is refused before anything is written.
    rows: dict[str, Any] = {name: [None] for name in V1_ROOTS}
    rows.update(root_id=[9], app=[APP], attempt=[1], origin_root_id=[9], source=["sqs"])
    rows.update(ingested_at=[now], id_scheme=[schemes.NUMERIC])
    version = _layout(warehouse)["roots"][0]
    with pytest.raises(SchemaMismatch, match="id_scheme 2: nothing was written"):
        writer.append_arrow("roots", pa.Table.from_pydict(rows))
    assert _layout(warehouse)["roots"][0] == version

    # Once upgraded, the same writer takes numeric roots, recorded as such.
    assert _run("upgrade") == 0
    assert Tracker(APP, ledger=writer).id_scheme == schemes.NUMERIC
    numeric.ack(numeric.spout("n-2", source="sqs", source_queue="q"), stage="store")
    assert writer.append(numeric.drain_roots(), numeric.drain()).roots == 1


def test_init_on_a_v1_ledger_says_exists_and_commits_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = _warehouse(tmp_path)
    write_v1_ledger(warehouse, now_utc())
    before = _layout(warehouse)
    assert _run("init") == 0
    out = capsys.readouterr().out.splitlines()
    assert f"exists  {warehouse}/roots" in out
    assert _layout(warehouse) == before


def test_the_upgrade_help_says_what_it_stops_and_what_producers_must_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        _run("upgrade", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "Delta streams that read a table stop at a schema change and must be restarted" in text
    assert 'schema_mode="merge"' in text
    assert json.dumps("id_scheme")[1:-1] in text


def test_doctests() -> None:
    import doctest

    from ackfold.ledger.schema import optional_columns
    from ackfold.ledger.setup import upgrade

    for module in (upgrade, optional_columns):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
        assert result.attempted > 0, module.__name__
