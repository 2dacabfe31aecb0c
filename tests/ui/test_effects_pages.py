"""A root's effects in the UI: its page lists, per declared output, its origin's rows (a
few, masked as payloads are); the failed roots and the dead letters say, per dead letter,
whether it left effects, read for the page's rows only."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import ackfold.effects
from ackfold.ledger.schema.ids import format_id
from ackfold.ui.redact import MASK
from tests.ui.conftest import FakeAirflow, make_client, ui_settings
from tests.ui.effects_ledger import (
    DEAD_ROWS,
    SECRET,
    TOKEN,
    WORD_ROWS,
    EffectsLedger,
    effects_client,
    effects_ledger,
)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> EffectsLedger:
    return effects_ledger(tmp_path_factory.mktemp("effects"))


@pytest.fixture
def client(ledger: EffectsLedger, airflow: FakeAirflow) -> Iterator[TestClient]:
    with effects_client(ledger, airflow) as c:
        yield c


def outputs_of(html: str) -> dict[str, tuple[str, bool]]:
    """The effects table: output -> (rows, whether it has a problem)."""
    return {
        m.group(1): (m.group(2), bool(m.group(3)))
        for m in re.finditer(
            r'data-testid="effect-output" data-output="([^"]+)" data-rows="(\d+)"'
            r'( data-problem="1")?',
            html,
        )
    }


def test_a_dead_letters_page_lists_its_rows_per_output_masked(
    client: TestClient, ledger: EffectsLedger
) -> None:
    page = client.get(f"/roots/{format_id(ledger.sample.dead)}")
    assert page.status_code == 200, page.text
    assert outputs_of(page.text) == {
        ledger.out: (str(DEAD_ROWS), False),
        ledger.words: (str(WORD_ROWS), False),
        ledger.gone: ("0", True),
    }
    # The table a stage reads says that a retract leaves its rows.
    assert page.text.count('data-testid="read-by-stage"') == 1
    assert re.search(
        rf'data-output="{re.escape(ledger.words)}"[^>]*data-read-by-stage="1"', page.text
    )
    rows = re.findall(r'data-testid="effect-row">([^<]*)</li>', page.text)
    assert len(rows) == DEAD_ROWS + WORD_ROWS
    rows = [row for row in rows if "word=" in row]
    assert len(rows) == DEAD_ROWS
    # Values shown; the secret-named column and the secret in the text masked.
    assert all("word=word" in row for row in rows), rows
    assert all(row.startswith("position=") for row in rows), rows  # the origin said once
    assert all(f"token={MASK}" in row for row in rows), rows
    assert SECRET not in page.text
    assert TOKEN not in page.text
    assert "_ackfold" not in page.text
    # The missing output says so, on its own line, and the page still shows the others.
    assert 'data-testid="effect-problem"' in page.text

    body = client.get(f"/api/roots/{format_id(ledger.sample.dead)}").json()
    by_output = {o["output"]: o for o in body["effects"]}
    assert by_output[ledger.out]["rows"] == DEAD_ROWS
    assert {row["token"] for row in by_output[ledger.out]["sample"]} == {MASK}
    assert SECRET not in str(body)
    assert TOKEN not in str(body)
    assert by_output[ledger.gone]["problem"]


def test_an_app_without_declared_outputs_says_so(client: TestClient, ledger: EffectsLedger) -> None:
    page = client.get(f"/roots/{format_id(ledger.sample.completed)}")
    assert page.status_code == 200
    assert 'id="effects-undeclared"' in page.text
    assert client.get(f"/api/roots/{format_id(ledger.sample.completed)}").json()["effects"] == []


def test_with_previews_off_a_root_page_shows_counts_only(ledger: EffectsLedger) -> None:
    with effects_client(ledger, FakeAirflow(), payload_preview_chars=0) as c:
        page = c.get(f"/roots/{format_id(ledger.sample.dead)}")
        assert outputs_of(page.text)[ledger.out] == (str(DEAD_ROWS), False)
        assert 'data-testid="effect-row"' not in page.text
        assert "previews are off" in page.text
        body = c.get(f"/api/roots/{format_id(ledger.sample.dead)}").json()
        assert all(o["sample"] == [] for o in body["effects"])
        assert "word0" not in page.text
        assert "word0" not in str(body)


def effects_column(html: str) -> dict[str, str]:
    """root id -> the row's effects cell (`data-effects`)."""
    found = {}
    for row in re.findall(r"<tr data-testid=\"(?:root|dead-letter)-row\".*?</tr>", html, re.S):
        root = re.search(r'data-root-id="([^"]+)"', row)
        cell = re.search(r'data-testid="effects" data-effects="([^"]*)"', row)
        assert root, row
        assert cell, row
        found[root.group(1)] = cell.group(1)
    return found


def test_the_failed_roots_and_the_dead_letters_say_which_left_effects(
    client: TestClient, ledger: EffectsLedger
) -> None:
    dead, timed_out = format_id(ledger.sample.dead), format_id(ledger.sample.timed_out)
    roots = client.get("/roots")
    assert roots.status_code == 200
    column = effects_column(roots.text)
    # A dead letter with rows says so; a timed-out root (it may yet be replayed) has no
    # verdict, though its origin has a row there too.
    assert column[dead] == "yes"
    assert column[timed_out] == ""
    assert f"{DEAD_ROWS} rows" in roots.text
    assert all(column[format_id(r)] == "no" for r in ledger.older)
    letters = client.get("/dead-letters")
    assert effects_column(letters.text) == {dead: "yes"}

    api = client.get("/api/roots", params={"status": "dead_lettered", "limit": "1"}).json()
    # The rows a stage reads are counted apart: a retract leaves them.
    assert api["effects"] == {
        dead: {
            "has_effects": True,
            "rows": DEAD_ROWS,
            "read_by_stage_rows": WORD_ROWS,
            "outputs": 3,
            "unreadable": True,
        }
    }
    assert client.get("/api/dead-letters").json()["effects"][dead]["rows"] == DEAD_ROWS


def test_a_page_looks_up_the_effects_of_its_own_rows_only(
    client: TestClient, ledger: EffectsLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The column costs one read per output for the page's dead letters, whatever the
    ledger holds: the lookup is asked about the rows shown, never the table."""
    asked: list[list[int]] = []
    real = ackfold.effects.find_effects

    def recorded(settings: Any, roots: Any, **options: Any) -> Any:
        asked.append([r.root_id for r in roots])
        return real(settings, roots, **options)

    monkeypatch.setattr(ackfold.effects, "find_effects", recorded)
    # Two of the five dead letters on the page, the newest: those two are looked up.
    page = client.get("/roots", params={"status": "dead_lettered", "limit": "2"})
    assert 'data-total="5"' in page.text
    assert list(effects_column(page.text)) == [format_id(r) for r in asked[0]]
    assert asked == [[ledger.sample.dead, ledger.older[0]]]
    asked.clear()
    page = client.get("/roots", params={"status": "dead_lettered", "limit": "2", "offset": "2"})
    assert asked == [ledger.older[1:3]]
    assert effects_column(page.text) == dict.fromkeys(map(format_id, ledger.older[1:3]), "no")
    asked.clear()
    # A page without a dead letter reads no output.
    client.get("/roots", params={"status": "completed"})
    assert asked == []
    client.get("/dead-letters", params={"limit": "1"})
    assert asked == [[ledger.sample.dead]]


def test_effects_of_an_app_with_no_outputs_on_the_roots_page(tmp_path: Path) -> None:
    """A ledger of contract v1 (no declared_outputs table): every page still answers."""
    from tests.ledger_fixtures import sample_ledger

    sample = sample_ledger(tmp_path / "warehouse")
    with make_client(ui_settings(sample.warehouse), FakeAirflow()) as c:
        roots = c.get("/roots", params={"status": "dead_lettered"})
        assert roots.status_code == 200
        assert effects_column(roots.text) == {format_id(sample.dead): "undeclared"}
        page = c.get(f"/roots/{format_id(sample.dead)}")
        assert page.status_code == 200
        assert 'id="effects-undeclared"' in page.text


def test_an_output_row_is_shown_as_masked_text_cut_short() -> None:
    from ackfold.ui.redact import Redactor

    redactor = Redactor(keys=("token",), patterns=(r"sk-\w+",))
    row = {"payload": '{"a": 1}', "Token": "t0k", "note": "key sk-abc!", "n": None, "x": 7}
    assert redactor.row(row | {"long": "a" * 300}, 10) == {
        "payload": MASK,  # the message itself is never shown
        "Token": MASK,
        "note": f"key {MASK}!",
        "n": None,
        "x": "7",
        "long": "a" * 9 + "…",
    }
    # A secret the cut would split is masked before the cut.
    assert redactor.row({"note": "abcdef sk-0123456789"}, 10) == {"note": f"abcdef {MASK}"}
