"""The retract button: only on a dead letter's page and for a viewer who may trigger the
retract DAG; a dry run first (what would go, read here, nothing deleted, nothing
triggered); its confirmation triggers `ackfold_manual_retract` as the user, and the run's
page follows the run. Login, CSRF and the one field are checked as the replay's are."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from ackfold.effects import parse_retract_conf
from ackfold.ledger.schema.ids import format_id
from ackfold.ui.redact import MASK
from tests.ui.conftest import SAME_ORIGIN, FakeAirflow, csrf, make_client, text_of, ui_settings
from tests.ui.effects_ledger import (
    DEAD_ROWS,
    SECRET,
    TOKEN,
    WORD_ROWS,
    EffectsLedger,
    effects_client,
    effects_ledger,
    output_rows,
)

DAG = "ackfold_manual_retract"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> EffectsLedger:
    return effects_ledger(tmp_path_factory.mktemp("retract"))


@pytest.fixture
def client(ledger: EffectsLedger, airflow: FakeAirflow) -> Iterator[TestClient]:
    with effects_client(ledger, airflow) as c:
        yield c


def test_the_button_is_on_a_dead_letters_page_only(
    client: TestClient, ledger: EffectsLedger, airflow: FakeAirflow
) -> None:
    dead = client.get(f"/roots/{format_id(ledger.sample.dead)}").text
    assert 'id="retract-button"' in dead
    assert 'action="/retract"' in dead
    for other in (ledger.sample.completed, ledger.sample.timed_out, ledger.sample.replayed):
        assert 'id="retract-button"' not in client.get(f"/roots/{format_id(other)}").text
    # An Airflow Viewer reads the effects, and is told what role a retract takes.
    with effects_client(ledger, airflow, token="jwt-vic") as vic:
        page = vic.get(f"/roots/{format_id(ledger.sample.dead)}").text
        assert 'id="retract-button"' not in page
        assert 'id="retract-not-allowed"' in page
        assert "ackfold_manual_retract" in page
        assert 'data-testid="effect-output"' in page
    assert airflow.calls == []


def test_the_dry_run_shows_what_would_go_and_deletes_nothing(
    client: TestClient, ledger: EffectsLedger, airflow: FakeAirflow
) -> None:
    dead = ledger.sample.dead
    page = client.post(
        "/retract",
        data={"csrf_token": csrf(client, f"/roots/{format_id(dead)}"), "root_id": format_id(dead)},
        headers=SAME_ORIGIN,
    )
    assert page.status_code == 200, page.text
    assert f'id="retract-count" data-count="{DEAD_ROWS}"' in page.text
    plan = dict(
        re.findall(
            r'data-testid="retract-output" data-output="([^"]+)" data-rows="(\d+)"', page.text
        )
    )
    assert plan == {ledger.out: str(DEAD_ROWS), ledger.words: "0", ledger.gone: "0"}
    assert "nothing is deleted there" in page.text  # the output it cannot read
    # The table a stage reads keeps its rows, and the dry run says so.
    assert f"{WORD_ROWS} rows stay: a stage reads this table" in page.text
    rows = re.findall(r'data-testid="effect-row">([^<]*)</li>', page.text)
    assert len(rows) == DEAD_ROWS
    assert all(f"token={MASK}" in r for r in rows)
    assert SECRET not in page.text
    assert TOKEN not in page.text
    # The confirmation names the root and posts here, with a fresh CSRF token.
    assert 'id="retract-confirm-form" method="post" action="/retract/confirm"' in page.text
    assert f'name="root_id" value="{format_id(dead)}"' in page.text
    assert f'id="cancel-retract" href="/roots/{format_id(dead)}"' in page.text
    # A dry run: nothing triggered, nothing deleted.
    assert airflow.calls == []
    assert output_rows(ledger.out, dead) == DEAD_ROWS


def test_the_confirmation_triggers_the_retract_dag_as_the_user_and_follows_the_run(
    client: TestClient, ledger: EffectsLedger, airflow: FakeAirflow
) -> None:
    dead = format_id(ledger.sample.dead)
    page = client.post(
        "/retract/confirm",
        data={
            "csrf_token": csrf(client, f"/roots/{dead}"),
            "root_id": dead,
        },
        headers=SAME_ORIGIN,
    )
    assert page.status_code == 200, page.text
    (call,) = airflow.calls
    assert call["url"] == f"http://airflow.test/api/v2/dags/{DAG}/dagRuns"
    assert call["auth"] == "Bearer jwt-ann"
    assert call["body"]["logical_date"] is None
    conf = call["body"]["conf"]
    assert conf["root_ids"] == [dead]
    assert conf["dry_run"] is False
    # The DAG takes the conf as it is (its own parser, the same as the UI's check).
    assert parse_retract_conf(conf, apps=["orders", "clicks"]).root_ids == (ledger.sample.dead,)
    assert re.search(r'id="run-state" data-state="queued"', page.text)
    assert "Retract queued" in text_of(page.text)
    assert 'data-poll="/api/retract/runs/manual__run1"' in page.text
    assert f'href="/dags/{DAG}/runs/manual__run1"' not in page.text  # Airflow's own address:
    assert f'href="http://airflow.test/dags/{DAG}/runs/manual__run1"' in page.text
    # Nothing is deleted by the UI itself: the DAG does it.
    assert output_rows(ledger.out, ledger.sample.dead) == DEAD_ROWS

    airflow.runs["manual__run1"]["state"] = "running"
    assert client.get("/api/retract/runs/manual__run1").json()["state"] == "running"
    airflow.runs["manual__run1"]["state"] = "success"
    airflow.summaries["manual__run1"] = {
        "retract_id": "r-1",
        "dry_run": False,
        "requested_by": "airflow:ann",
        "selected": 1,
        "roots": [{"outputs": [{"sample": [{"token": TOKEN, "note": SECRET}]}]}],
        "to_delete": {ledger.out: DEAD_ROWS},
        "deleted": {ledger.out: DEAD_ROWS},
        "failed": {},
        "skipped": {},
        "problems": {ledger.gone: "no table"},
    }
    body = client.get("/api/retract/runs/manual__run1").json()
    assert body["finished"] is True
    assert body["summary"]["deleted"] == {ledger.out: DEAD_ROWS}
    # The run's sample rows were never masked: neither the page nor its JSON shows them.
    assert "roots" not in body["summary"]
    html = client.get("/retract/runs/manual__run1").text
    assert SECRET not in html + json.dumps(body)
    assert TOKEN not in html + json.dumps(body)
    words = text_of(html)
    assert f"Deleted {DEAD_ROWS} rows" in words
    assert "by airflow:ann" in words
    assert "data-poll" not in html
    # Every call to Airflow carried the user's own token, and asked the retract DAG.
    assert {g["auth"] for g in airflow.gets} == {"Bearer jwt-ann"}
    assert all(f"/dags/{DAG}" in g["path"] for g in airflow.gets)


@pytest.mark.parametrize("path", ["/retract", "/retract/confirm"])
def test_refusals(
    path: str, client: TestClient, ledger: EffectsLedger, airflow: FakeAirflow
) -> None:
    dead = format_id(ledger.sample.dead)
    token = csrf(client, f"/roots/{dead}")

    def post(data: dict[str, Any], headers: dict[str, str] = SAME_ORIGIN) -> Any:
        return client.post(path, data=data, headers=headers)

    # CSRF: no token, a forged one, a foreign origin.
    assert post({"root_id": dead}).status_code == 403
    assert post({"root_id": dead, "csrf_token": "1.forged"}).status_code == 403
    foreign = {"Origin": "http://evil.example"}
    assert post({"root_id": dead, "csrf_token": token}, foreign).status_code == 403
    # The field: exactly one root id, as ids are written; text never reaches SQL.
    for bad in ("1; DROP TABLE root_state", "' OR 1=1 --", "9" * 5000, ""):
        answer = post({"root_id": bad, "csrf_token": token})
        assert answer.status_code == 400, (bad, answer.text)
        assert "root_id" in answer.text
    two = post({"root_id": [dead, format_id(ledger.sample.timed_out)], "csrf_token": token})
    assert two.status_code == 400
    assert "exactly one" in two.text
    # Not a dead letter: refused, saying why; an unknown root: 404.
    for other in (ledger.sample.completed, ledger.sample.timed_out, ledger.sample.retry):
        refused = post({"root_id": format_id(other), "csrf_token": token})
        assert refused.status_code == 409, (other, refused.text)
        assert "retract refused" in refused.text
    unknown = post({"root_id": "0x0000000000000007", "csrf_token": token})
    assert unknown.status_code == 404
    # A viewer whose role may not trigger the DAG, and an anonymous one.
    with effects_client(ledger, airflow, token="jwt-vic") as vic:
        answer = vic.post(path, data={"root_id": dead, "csrf_token": token}, headers=SAME_ORIGIN)
        assert answer.status_code == 403
        assert "ackfold_manual_retract" in answer.text
    with effects_client(ledger, airflow, token=None) as anonymous:
        answer = anonymous.post(path, data={"root_id": dead}, headers=SAME_ORIGIN)
        assert answer.status_code == 303
        assert urlsplit(answer.headers["location"]).path == "/auth/login"
    assert airflow.calls == []
    assert output_rows(ledger.out, ledger.sample.dead) == DEAD_ROWS


def test_a_dead_letter_with_nothing_left_has_nothing_to_confirm(
    client: TestClient, ledger: EffectsLedger, airflow: FakeAirflow
) -> None:
    empty = ledger.older[0]
    data = {"csrf_token": csrf(client, f"/roots/{format_id(empty)}"), "root_id": format_id(empty)}
    page = client.post("/retract", data=data, headers=SAME_ORIGIN)
    assert page.status_code == 200, page.text
    assert 'id="nothing-to-retract"' in page.text
    assert 'id="retract-confirm-form"' not in page.text
    refused = client.post("/retract/confirm", data=data, headers=SAME_ORIGIN)
    assert refused.status_code == 400
    assert "nothing to retract" in refused.text
    assert airflow.calls == []


def test_a_retract_run_id_is_checked(client: TestClient) -> None:
    bad = client.get("/api/retract/runs/x%3Cscript%3E")
    assert bad.status_code == 400
    assert bad.json()["field"] == "run_id"
    assert client.get("/api/retract/runs/manual__nope").status_code == 404


def test_a_failed_or_paused_retract_run_says_so(
    client: TestClient, ledger: EffectsLedger, airflow: FakeAirflow
) -> None:
    dead = format_id(ledger.sample.dead)
    data = {"csrf_token": csrf(client, f"/roots/{dead}"), "root_id": dead}
    airflow.paused = True
    page = client.post("/retract/confirm", data=data, headers=SAME_ORIGIN)
    assert page.status_code == 200, page.text
    assert 'id="run-paused"' in page.text
    assert "ackfold_manual_retract</code> is paused" in page.text
    airflow.paused = False
    # The DAG refused (the root moved on since the dry run), or a delete failed.
    airflow.runs["manual__run1"]["state"] = "failed"
    words = text_of(client.get("/retract/runs/manual__run1").text)
    assert "Retract failed" in words
    assert "a retract may be run again" in words
    assert "Deleted" not in words


def test_the_json_twin_dry_runs_by_default_then_triggers(
    client: TestClient, ledger: EffectsLedger, airflow: FakeAirflow
) -> None:
    dead = format_id(ledger.sample.dead)
    header = {"X-CSRF-Token": client.get("/api/csrf").json()["csrf_token"], **SAME_ORIGIN}
    assert client.post("/api/retract", json={"root_id": dead}).status_code == 403  # no token
    planned = client.post("/api/retract", json={"root_id": dead}, headers=header)
    assert planned.status_code == 200, planned.text
    body = planned.json()
    assert body["dry_run"] is True
    # Nothing from what it cannot read, nor from the table a stage reads.
    assert body["to_delete"] == {ledger.out: DEAD_ROWS}
    assert ledger.gone in body["problems"]
    assert SECRET not in planned.text
    assert TOKEN not in planned.text
    assert airflow.calls == []
    for bad, field in (
        ({"root_id": 42}, "root_id"),
        ({"root_id": dead, "dry_run": "no"}, "dry_run"),
        ({"root_ids": [dead]}, "root_ids"),
    ):
        answer = client.post("/api/retract", json=bad, headers=header)
        assert answer.status_code == 400, bad
        assert answer.json()["field"] == field
    done = client.post("/api/retract", json={"root_id": dead, "dry_run": False}, headers=header)
    assert done.status_code == 200, done.text
    assert done.json()["run_id"] == "manual__run1"
    (call,) = airflow.calls
    assert call["body"]["conf"]["root_ids"] == [dead]
    assert call["body"]["conf"]["dry_run"] is False
    assert output_rows(ledger.out, ledger.sample.dead) == DEAD_ROWS


def test_with_previews_off_the_dry_run_shows_counts_only(
    ledger: EffectsLedger, airflow: FakeAirflow
) -> None:
    settings = ui_settings(ledger.warehouse, payload_preview_chars=0)
    with make_client(settings, airflow) as c:
        dead = ledger.sample.dead
        data = {"csrf_token": csrf(c, f"/roots/{format_id(dead)}"), "root_id": format_id(dead)}
        page = c.post("/retract", data=data, headers=SAME_ORIGIN)
        assert page.status_code == 200, page.text
        assert f'id="retract-count" data-count="{DEAD_ROWS}"' in page.text
        assert 'data-testid="effect-row"' not in page.text
        assert "previews are off" in page.text
        assert "word0" not in page.text
