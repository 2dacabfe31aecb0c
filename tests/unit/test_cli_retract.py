"""`ackfold retract`, `ackfold outputs` and the effects in `ackfold show` (issue 58), run in
this process on delta-rs tables on disk, no JVM: a dry run unless --yes, the replay's
selection flags, a clear message for every refusal and bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from deltalake import DeltaTable

from ackfold import spark as spark_module
from ackfold.cli import main as cli_module
from ackfold.ledger.schema.ids import format_id
from tests.effects_ledger import COUNTS_PER_ROOT, ROOTS_OF, WORDS_PER_ROOT, Ledger, effects_ledger
from tests.unit.test_cli_read import Run

DEAD = ROOTS_OF["dead"]


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return effects_ledger(tmp_path / "l")


@pytest.fixture
def cli(
    clean_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    ledger: Ledger,
    tmp_path: Path,
) -> Callable[..., Run]:
    """`ackfold ARGS` in this process, with the ledger's settings (ackfold.yaml), no JVM."""

    def no_jvm(*args: object, **kwargs: object) -> None:
        raise AssertionError("retract, outputs and show need no Spark")

    monkeypatch.setattr(spark_module, "get_spark", no_jvm)
    (tmp_path / "ackfold.yaml").write_text(
        json.dumps(
            {
                "warehouse": ledger.settings.table_root,
                "var_dir": str(tmp_path / "var"),
                "engine": {"kind": "embedded"},
                "apps": {
                    "orders": {"outputs": [{"path": ledger.counts, "origin_column": "origin"}]}
                },
            }
        )
    )
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> Run:
        code = cli_module.run(list(args))
        out, err = capsys.readouterr()
        return Run(args, code, out, err)

    return run


def test_retract_is_a_dry_run_without_yes(cli: Callable[..., Run], ledger: Ledger) -> None:
    before = DeltaTable(ledger.words).version()
    run = cli("retract", "--root", format_id(DEAD.root_id))
    assert run.code == 0, run.err
    assert f"would delete {WORDS_PER_ROOT} row(s) of {format_id(DEAD.root_id)}" in run.err
    assert "cannot read" in run.err  # the missing output is said
    assert run.out.startswith("dry run, nothing deleted")
    assert "--yes" in run.out
    assert DeltaTable(ledger.words).version() == before


def test_retract_yes_deletes_and_says_what(cli: Callable[..., Run], ledger: Ledger) -> None:
    run = cli("retract", "--root", format_id(DEAD.root_id), "--yes", "--json")
    assert run.code == 0, run.err
    summary = json.loads(run.out)
    assert summary["deleted"] == {ledger.words: WORDS_PER_ROOT, ledger.counts: COUNTS_PER_ROOT}
    assert summary["requested_by"].startswith("cli:")
    assert DEAD.origin not in ledger.rows(ledger.words)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("--root", "0x2a"), 1, "unknown root id(s), not in root_state: 0x000000000000002a"),
        (("--root", format_id(ROOTS_OF["completed"].root_id), "--yes"), 1, "it is completed"),
        (("--root", format_id(ROOTS_OF["planned"].root_id)), 1, "replay r-1 sends it back"),
        (("--root", "zz"), 2, "zz"),
        (("--limit", "0"), 2, "limit"),
        (("--since", "2026-11-21T00:00:00Z", "--until", "2026-11-20T00:00:00Z"), 2, "--since"),
        (("--yes", "--dry-run"), 2, "give one of them"),
        (("--app", "nobody"), 1, "unknown app 'nobody'"),
    ],
)
def test_retract_refuses_bad_input_in_clear_words(
    cli: Callable[..., Run], ledger: Ledger, args: tuple[str, ...], code: int, message: str
) -> None:
    before = DeltaTable(ledger.words).version()
    run = cli("retract", *args)
    assert run.code == code, (run.out, run.err)
    assert message in run.err
    assert "Traceback" not in run.err
    assert DeltaTable(ledger.words).version() == before


def test_outputs_lists_and_declares(cli: Callable[..., Run], ledger: Ledger) -> None:
    run = cli("outputs", "--app", "orders", "--json")
    listed = {d["output"]: d for d in json.loads(run.out)}
    assert listed[ledger.counts]["declared_by"] == "settings"
    assert listed[ledger.words]["origin_column"] == "origin_root_id"
    run = cli("outputs", "--declare", "/lake/totals", "--app", "orders", "--clean")
    assert run.code == 0, run.err
    assert "/lake/totals" in cli("outputs").out
    bad = cli("outputs", "--declare", "/lake/t", "--app", "orders", "--origin-column", "a b")
    assert bad.code == 2
    assert "plain column name" in bad.err
    assert cli("outputs", "--declare", "/lake/t").code == 2  # no app


def test_show_lists_the_roots_effects(cli: Callable[..., Run], ledger: Ledger) -> None:
    run = cli("show", format_id(DEAD.root_id))
    assert run.code == 0, run.err
    assert f"effects (rows of origin {format_id(DEAD.origin)}" in run.out
    assert f"{ledger.words}  {WORDS_PER_ROOT} row(s)" in run.out
    assert f"{ledger.counts}  {COUNTS_PER_ROOT} row(s)" in run.out
    assert f"{ledger.missing}  cannot read: no Delta table" in run.out
    shown = json.loads(cli("show", format_id(DEAD.root_id), "--json").out)
    assert shown["effects"]["rows"] == WORDS_PER_ROOT + COUNTS_PER_ROOT


def test_retract_run_twice_says_there_is_nothing_left_and_succeeds(
    cli: Callable[..., Run],
) -> None:
    root = format_id(ROOTS_OF["other_dead"].root_id)
    assert cli("retract", "--root", root, "--yes").code == 0
    for flags in (("--yes",), ()):  # again, and its dry run
        run = cli("retract", "--root", root, *flags)
        assert run.code == 0, run.err
        assert run.out.startswith("nothing to delete: 1 dead letter(s) selected, none has rows")


def test_a_selection_of_no_dead_letter_exits_1(cli: Callable[..., Run]) -> None:
    run = cli("retract", "--app", "orders", "--since", "2099-01-01T00:00:00Z", "--yes")
    assert run.code == 1, (run.out, run.err)
    assert run.out.startswith("no dead letter to retract: none matches ")
