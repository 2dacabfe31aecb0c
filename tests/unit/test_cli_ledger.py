"""`ackfold init` and `ackfold schema`, and what `ackfold reconcile` says before there is
a ledger: no JVM anywhere. The commands run in-process (`cli.run`), and once as the
installed console script, which must leave with exit 0, never delta-rs' abort (134)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from deltalake import DeltaTable

from ackfold.cli import main as cli
from ackfold.cli.common import check_app
from ackfold.config import load_settings
from ackfold.ledger.errors import NoLedger
from ackfold.ledger.reading.reader import LedgerReader
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, TABLES

ACKFOLD = Path(sys.executable).parent / "ackfold"


@pytest.fixture(autouse=True)
def _fresh_var_dir(clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))


def test_init_creates_the_ledger_in_the_warehouse_setting_then_keeps_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = tmp_path / "var" / "warehouse"
    assert cli.run(["init"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"created {warehouse}/{t}" for t in TABLES]
    assert all(DeltaTable(str(warehouse / t)).version() == 0 for t in TABLES)
    assert cli.run(["init"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"exists  {warehouse}/{t}" for t in TABLES]


def test_init_takes_another_warehouse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(["init", "--warehouse", str(tmp_path / "elsewhere")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(TABLES)
    assert DeltaTable.is_deltatable(str(tmp_path / "elsewhere" / ACK_EVENTS))
    assert not (tmp_path / "var" / "warehouse").exists()


def test_init_refuses_an_empty_warehouse_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(["init", "--warehouse", " "]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.splitlines() == [
        "ackfold: --warehouse must name a directory or a URI, got an empty string"
    ]


def test_init_over_a_table_of_another_shape_is_one_line_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    warehouse = tmp_path / "w"
    write_deltalake(str(warehouse / ROOTS), pa.table({"root_id": pa.array([], pa.string())}))
    assert cli.run(["init", "--warehouse", str(warehouse)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ackfold: {warehouse}/{ROOTS}: column 'root_id' is \"string\"")


def test_reconcile_without_a_ledger_points_to_init_and_after_init_it_may_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = tmp_path / "var" / "warehouse"
    assert cli.run(["reconcile"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"ackfold: no ledger at {warehouse} (no table ack_events): create it with "
        "`ackfold init`, then let an app write events"
    ]
    assert cli.run(["init"]) == 0
    # The check `ackfold reconcile` makes before it starts Spark now passes.
    check_app(load_settings(), LedgerReader(str(warehouse)), None)
    with pytest.raises(NoLedger, match="run `ackfold reconcile`"):
        LedgerReader(str(tmp_path / "none")).known_apps()  # root_state: still reconcile's


def test_schema_prints_the_contract_as_sql_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(["schema"]) == 0
    out = capsys.readouterr().out
    assert out.count("CREATE TABLE IF NOT EXISTS") == 2
    assert "CREATE TABLE IF NOT EXISTS ack_events (\n    event_id STRING NOT NULL," in out
    assert "CREATE TABLE IF NOT EXISTS roots (" in out
    assert "'delta.enableDeletionVectors' = 'false'" in out
    assert "root_state" not in out


def test_schema_as_json_schema_is_valid_draft_2020_12(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(["schema", "--format", "json-schema"]) == 0
    bundle = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(bundle)
    assert sorted(bundle["$defs"]) == [ACK_EVENTS, ROOTS]
    assert cli.run(["schema", "--format", "json-schema", "--table", "roots"]) == 0
    one = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(one)
    assert one["title"] == ROOTS
    assert one["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schema_as_arrow_for_every_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(["schema", "--format", "arrow", "--table", "all"]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("-- ")] == [
        f"-- {t}" for t in TABLES
    ]
    assert "event_time: timestamp[us, tz=UTC] not null" in out
    assert cli.run(["schema", "--format", "arrow", "--table", "roots,ack_events"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("-- roots: ")
    assert "\n-- ack_events: " in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["schema", "--format", "xml"], "--format must be one of sql, arrow, json-schema"),
        (["schema", "--table", "events"], "--table: unknown table 'events'; tables: ack_events"),
        (["schema", "--table", ","], "--table needs a table name"),
    ],
)
def test_schema_refuses_bad_input_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.run(argv) == cli.EXIT_USAGE
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ackfold: {message}")


def test_the_console_script_leaves_cleanly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACKFOLD_")}
    warehouse = tmp_path / "script"
    for _ in range(2):  # create, then check the existing tables: both read delta-rs
        result = subprocess.run(
            [str(ACKFOLD), "init", "--warehouse", str(warehouse)],
            env={**env, "ACKFOLD_VAR_DIR": str(tmp_path / "var")},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert len(result.stdout.splitlines()) == len(TABLES)
