"""Login, CSRF and the replay trigger; the payload preview's redaction."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from ackfold.ui.redact import MASK, Redactor
from tests.ledger_fixtures import Sample
from tests.ui.conftest import HOST, FakeAirflow, make_client, ui_settings

SAME_ORIGIN = {"Origin": f"http://{HOST}"}


def csrf(client: TestClient, path: str = "/roots") -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert match is not None
    return match.group(1)


def test_anonymous_requests_are_refused(sample: Sample, airflow: FakeAirflow) -> None:
    with make_client(ui_settings(sample.warehouse), airflow, token=None) as anonymous:
        page = anonymous.get("/roots", params={"app": "orders"})
        assert page.status_code == 303
        login = urlsplit(page.headers["location"])
        assert login.path == "/auth/login"
        assert parse_qs(login.query)["next"] == [f"http://{HOST}/roots?app=orders"]
        for path in ("/api/roots", "/api/overview", f"/api/roots/{sample.dead}", "/api/csrf"):
            assert anonymous.get(path).status_code == 401, path
        assert anonymous.get("/static/ackfold.css").status_code in (303, 401)
        posted = anonymous.post("/replay/confirm", data={"root_id": str(sample.dead)})
        assert posted.status_code == 401
    assert airflow.calls == []


def test_replay_of_selected_roots_asks_then_triggers_as_the_user(
    client: TestClient, sample: Sample, airflow: FakeAirflow
) -> None:
    token = csrf(client)
    selected = {
        "csrf_token": token,
        "scope": "selected",
        "root_id": [str(sample.dead), str(sample.replayed)],
    }
    confirm = client.post("/replay", data=selected, headers=SAME_ORIGIN)
    assert confirm.status_code == 200
    assert 'id="confirm-count" data-count="1"' in confirm.text  # the replayed one is skipped
    assert "1 replayed" in confirm.text
    assert re.search(r'id="dry-run" name="dry_run" value="1" checked', confirm.text)
    assert airflow.calls == []  # nothing triggered before the confirmation

    done = client.post(
        "/replay/confirm",
        data={
            "csrf_token": token,
            "scope": "selected",
            "root_id": str(sample.dead),
            "dry_run": "1",
        },
        headers=SAME_ORIGIN,
    )
    assert done.status_code == 200, done.text
    [call] = airflow.calls
    assert call["url"] == "http://airflow.test/api/v2/dags/ackfold_manual_replay/dagRuns"
    assert call["auth"] == "Bearer jwt-ann"
    assert call["body"]["logical_date"] is None
    conf = call["body"]["conf"]
    assert conf["root_ids"] == [str(sample.dead)]
    assert conf["dry_run"] is True
    assert (
        'id="run-link" href="http://airflow.test/dags/ackfold_manual_replay/runs/manual__run1"'
        in done.text
    )

    # Unticking the dry run sends for real.
    client.post(
        "/replay/confirm",
        data={"csrf_token": token, "scope": "selected", "root_id": str(sample.dead)},
        headers=SAME_ORIGIN,
    )
    assert airflow.calls[-1]["body"]["conf"]["dry_run"] is False


def test_replay_of_the_current_filter(
    client: TestClient, sample: Sample, airflow: FakeAirflow
) -> None:
    token = csrf(client)
    confirm = client.post(
        "/replay",
        data={"csrf_token": token, "scope": "filter", "app": "clicks"},
        headers=SAME_ORIGIN,
    )
    assert confirm.status_code == 200
    hidden = re.findall(r'name="root_id" value="(-?\d+)"', confirm.text)
    assert sorted(int(i) for i in hidden) == sorted([sample.dead, sample.timed_out])


@pytest.mark.parametrize(
    ("headers", "with_token", "why"),
    [
        (SAME_ORIGIN, False, "CSRF token"),
        ({"Origin": "http://evil.example"}, True, "foreign Origin"),
        ({"Referer": "http://evil.example/page"}, True, "foreign Origin"),
        ({}, True, "no Origin or Referer"),
    ],
)
def test_cross_site_replays_are_refused(
    client: TestClient,
    sample: Sample,
    airflow: FakeAirflow,
    headers: dict[str, str],
    with_token: bool,
    why: str,
) -> None:
    data = {"scope": "selected", "root_id": str(sample.dead), "dry_run": "1"}
    if with_token:
        data["csrf_token"] = csrf(client)
    response = client.post("/replay/confirm", data=data, headers=headers)
    assert response.status_code == 403
    assert why in response.text
    assert airflow.calls == []


def test_a_csrf_token_is_bound_to_its_user(sample: Sample, airflow: FakeAirflow) -> None:
    settings = ui_settings(sample.warehouse)
    with (
        make_client(settings, airflow, token="jwt-bob") as bob,
        make_client(settings, airflow) as ann,
    ):
        response = ann.post(
            "/replay/confirm",
            data={"csrf_token": csrf(bob), "root_id": str(sample.dead)},
            headers=SAME_ORIGIN,
        )
    assert response.status_code == 403
    assert "invalid CSRF token" in response.text
    assert airflow.calls == []


def test_json_replay_with_a_bearer_token(sample: Sample, airflow: FakeAirflow) -> None:
    with make_client(ui_settings(sample.warehouse), airflow, token=None) as script:
        auth = {"Authorization": "Bearer jwt-ann"}
        token = script.get("/api/csrf", headers=auth).json()["csrf_token"]
        body = {"root_ids": [str(sample.timed_out)]}
        assert script.post("/api/replay", json=body, headers=auth).status_code == 403
        response = script.post("/api/replay", json=body, headers={**auth, "X-CSRF-Token": token})
        assert response.status_code == 200, response.text
        assert response.json()["dry_run"] is True
        assert response.json()["run_id"] == "manual__run1"
        bad = script.post(
            "/api/replay", json={"root_ids": [123]}, headers={**auth, "X-CSRF-Token": token}
        )
        assert bad.status_code == 400
        assert bad.json()["field"] == "root_ids"
    assert airflow.calls[0]["body"]["conf"]["root_ids"] == [str(sample.timed_out)]


def test_airflow_refusing_the_run_is_shown(
    client: TestClient, sample: Sample, airflow: FakeAirflow
) -> None:
    airflow.answer = 403
    response = client.post(
        "/replay/confirm",
        data={"csrf_token": csrf(client), "root_id": str(sample.dead)},
        headers=SAME_ORIGIN,
    )
    assert response.status_code == 403
    assert "Airflow answered 403: Forbidden" in response.text


def test_payload_preview_is_capped_and_redacted(sample: Sample, airflow: FakeAirflow) -> None:
    settings = ui_settings(sample.warehouse, payload_preview_chars=60, redact_keys=["SKU"])
    with make_client(settings, airflow) as c:
        payload = c.get(f"/api/roots/{sample.completed}").json()["source"]["payload"]
        html = c.get(f"/roots/{sample.completed}").text
    assert payload["chars"] == len(sample.payload)
    assert payload["truncated"] is True
    assert len(payload["preview"]) == 60
    assert '"x"' not in payload["preview"]
    assert payload["preview"].startswith('{"order": 1, "lines": [{"sku": ***}, {"sku": ***}')
    assert payload["masked"] > 3
    assert "[{&#34;sku&#34;: ***}, {&#34;sku&#34;: ***}" in html
    assert "&#34;x&#34;" not in html


def test_redaction_masks_nested_cut_and_pattern_values() -> None:
    redactor = Redactor(keys=("password", "card"), patterns=(r"\b\d{4}-\d{4}\b",))
    text = '{"card": {"n": "1", "cvv": 2}, "password": "hun\\"ter2", "pin": 1234-5678, "tail": "x'
    masked, count = redactor.mask(text)
    assert masked == f'{{"card": {MASK}, "password": {MASK}, "pin": {MASK}, "tail": "x'
    assert count == 3
    cut, _ = redactor.mask('{"password": "a secret cut by the prev')
    assert cut == f'{{"password": {MASK}'
    assert Redactor().preview("abcdef", 3).text == "abc"


def test_doctests() -> None:
    import doctest

    from ackfold.ui import charts, queries, redact

    for module in (charts, queries, redact):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
        assert result.attempted > 0, module.__name__
