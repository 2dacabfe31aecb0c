"""A replay by hand says what has happened, no more: queued when Airflow has only queued
the run, then running, then what the run sent; with a link back to each root and what
must happen next. A root's page says how its chain ended."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from ackfold.ledger.schema.ids import format_id
from tests.ledger_fixtures import Sample
from tests.ui.conftest import SAME_ORIGIN, FakeAirflow, csrf, text_of


def state_of(html: str) -> str:
    match = re.search(r'id="run-state" data-state="(\w+)"', html)
    assert match is not None, html
    return match.group(1)


def test_a_hand_replay_is_queued_then_running_then_sent(
    client: TestClient, sample: Sample, airflow: FakeAirflow
) -> None:
    page = client.post(
        "/replay/confirm",
        data={"csrf_token": csrf(client), "root_id": str(sample.dead)},
        headers=SAME_ORIGIN,
    )
    assert page.status_code == 200, page.text
    words = text_of(page.text)
    assert state_of(page.text) == "queued"
    assert "Replay queued" in words
    assert "sent" not in words.replace("nothing is sent until it runs", "")
    # Back to the root, and what must happen next.
    assert f'href="/roots/{format_id(sample.dead)}"' in page.text
    assert "ackfold_app_&lt;app&gt;" in page.text
    # The page follows the run (ackfold.js asks the JSON, and shows the page again).
    assert 'data-poll="/api/replay/runs/manual__run1"' in page.text
    assert 'data-page="/replay/runs/manual__run1"' in page.text

    def follow() -> tuple[dict, str]:
        body = client.get("/api/replay/runs/manual__run1").json()
        html = client.get("/replay/runs/manual__run1").text
        return body, html

    body, html = follow()
    assert body["state"] == "queued"
    assert body["finished"] is False
    assert body["root_ids"] == [format_id(sample.dead)]
    assert state_of(html) == "queued"

    airflow.runs["manual__run1"]["state"] = "running"
    body, html = follow()
    assert body["state"] == "running"
    assert state_of(html) == "running"
    assert "nothing is confirmed sent yet" in text_of(html)

    airflow.runs["manual__run1"]["state"] = "success"
    airflow.summaries["manual__run1"] = {"dry_run": False, "planned": 1, "sent": 1, "skipped": {}}
    body, html = follow()
    assert body["finished"] is True
    assert body["summary"]["sent"] == 1
    assert state_of(html) == "success"
    assert "Sent 1 root to its source queue as a new attempt." in text_of(html)
    assert "data-poll" not in html  # nothing left to follow
    airflow.summaries["manual__run1"] = {"dry_run": False, "planned": 2, "sent": 2, "skipped": {}}
    _, html = follow()
    assert "Sent 2 roots to their source queues as new attempts." in text_of(html)
    # Every call to Airflow carried the user's own token.
    assert {g["auth"] for g in airflow.gets} == {"Bearer jwt-ann"}


def test_a_failed_run_and_a_dry_run_say_so(
    client: TestClient, sample: Sample, airflow: FakeAirflow
) -> None:
    for dry_run in (False, True):
        data = {"csrf_token": csrf(client), "root_id": str(sample.dead)}
        if dry_run:
            data["dry_run"] = "on"
        client.post("/replay/confirm", data=data, headers=SAME_ORIGIN)
    airflow.runs["manual__run1"]["state"] = "failed"
    failed = text_of(client.get("/replay/runs/manual__run1").text)
    assert "Replay failed" in failed
    assert "The roots keep their status" in failed
    airflow.runs["manual__run2"]["state"] = "success"
    airflow.summaries["manual__run2"] = {"dry_run": True, "planned": 1, "sent": 0}
    dry = text_of(client.get("/replay/runs/manual__run2").text)
    assert "Dry run: it would send 1 root; nothing was sent" in dry
    assert "ackfold_app_" not in dry


def test_a_run_id_is_checked_and_an_unknown_run_is_airflows_404(client: TestClient) -> None:
    bad = client.get("/api/replay/runs/x%3Cscript%3E")
    assert bad.status_code == 400
    assert bad.json()["field"] == "run_id"
    assert client.get("/api/replay/runs/manual__nope").status_code == 404
    assert client.get("/replay/runs/manual__nope").status_code == 404


def test_a_roots_page_says_how_its_replays_ended(client: TestClient, sample: Sample) -> None:
    first = client.get(f"/roots/{sample.replayed}").text
    outcome = re.search(r'<p id="root-outcome"[^>]*data-status="(\w+)" data-attempt="(\d+)"', first)
    assert outcome is not None
    assert outcome.groups() == ("completed", "2")
    assert "Outcome: completed at attempt 2 (root" in text_of(first)
    assert f'href="/roots/{format_id(sample.retry)}"' in first
    # A root never replayed has no outcome line: its status says it all.
    assert 'id="root-outcome"' not in client.get(f"/roots/{sample.completed}").text


def test_a_hand_replay_of_a_paused_dag_says_it_waits_for_an_unpause(
    client: TestClient, sample: Sample, airflow: FakeAirflow
) -> None:
    # A deployment whose DAGs are paused at creation: the run is queued, and stays so.
    airflow.paused = True
    try:
        page = client.post(
            "/replay/confirm",
            data={"csrf_token": csrf(client), "root_id": str(sample.dead)},
            headers=SAME_ORIGIN,
        )
        assert page.status_code == 200, page.text
        assert state_of(page.text) == "queued"
        assert "is paused" in text_of(page.text)
        run_id = re.search(r'data-run-id="([^"]+)"', page.text)
        assert run_id is not None
        assert client.get(f"/api/replay/runs/{run_id.group(1)}").json()["paused"] is True
        airflow.paused = False
        assert client.get(f"/api/replay/runs/{run_id.group(1)}").json()["paused"] is False
        assert "is paused" not in text_of(client.get(f"/replay/runs/{run_id.group(1)}").text)
    finally:
        airflow.paused = False
