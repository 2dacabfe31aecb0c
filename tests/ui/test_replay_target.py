"""Where the replay call goes: Airflow's configured address, never the request's `Host`.

A probe of the running app once made the server POST the user's Airflow token to
`http://169.254.169.254/api/v2/...` by sending `Host: 169.254.169.254:80`. These tests send
such a `Host`, pointing at a real HTTP listener on loopback, and check that nothing arrives
there, whatever the configuration.
"""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.ledger_fixtures import Sample
from tests.ui.conftest import FakeAirflow, Listener, make_client, ui_settings


def _probe(client: TestClient, sample: Sample, host: str) -> tuple[int, str]:
    """A logged-in replay with a valid CSRF token, its Host and Origin pointed at `host`."""
    page = client.get("/roots")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None
    response = client.post(
        "/replay/confirm",
        data={"csrf_token": token.group(1), "root_id": str(sample.dead), "dry_run": "1"},
        headers={"Host": host, "Origin": f"http://{host}"},
    )
    return response.status_code, response.text


def test_without_base_url_the_call_goes_to_the_api_servers_own_loopback_address(
    sample: Sample,
) -> None:
    with Listener() as airflow, Listener() as elsewhere:
        settings = ui_settings(sample.warehouse)
        with make_client(settings, None, loopback_url=airflow.url) as client:
            status, text = _probe(client, sample, elsewhere.netloc)
        assert status == 200, text
        assert elsewhere.requests == elsewhere.reads == [], (
            "the request's Host must never be called"
        )
        [call] = airflow.requests
        assert call["path"] == "/api/v2/dags/ackfold_manual_replay/dagRuns"
        assert call["auth"] == "Bearer jwt-ann"
        # Without base_url, the run's link is relative to the server the browser is on.
        assert 'id="run-link" href="/dags/ackfold_manual_replay/runs/manual__real"' in text


def test_base_url_wins_over_the_loopback_address(sample: Sample) -> None:
    with Listener() as airflow, Listener() as loopback, Listener() as elsewhere:
        settings = ui_settings(sample.warehouse)
        with make_client(
            settings, None, airflow_url=airflow.url, loopback_url=loopback.url
        ) as client:
            status, text = _probe(client, sample, elsewhere.netloc)
        assert status == 200, text
        assert (len(airflow.requests), loopback.requests, elsewhere.requests) == (1, [], [])
        assert loopback.reads == elsewhere.reads == []
        assert f'href="{airflow.url}/dags/ackfold_manual_replay/runs/manual__real"' in text


def test_with_no_known_address_the_replay_is_refused_naming_the_setting(sample: Sample) -> None:
    with Listener() as elsewhere:
        with make_client(ui_settings(sample.warehouse), None) as client:
            status, text = _probe(client, sample, elsewhere.netloc)
            api = client.post(
                "/api/replay",
                json={"root_ids": [str(sample.dead)]},
                headers={"Authorization": "Bearer jwt-ann", "Host": elsewhere.netloc},
            )
        assert status == 503
        assert "[api] base_url (AIRFLOW__API__BASE_URL)" in text
        assert api.status_code == 503
        assert "[api] base_url" in api.json()["detail"]
        assert elsewhere.requests == elsewhere.reads == []


def test_airflows_refusal_is_quoted_on_one_line_and_cut(
    client: TestClient, sample: Sample, airflow: FakeAirflow
) -> None:
    airflow.answer = 422
    airflow.detail = "bad conf\n" + "x" * 5000
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/roots").text)
    assert token is not None
    response = client.post(
        "/api/replay",
        json={"root_ids": [str(sample.dead)]},
        headers={"Origin": "http://testserver", "X-CSRF-Token": token.group(1)},
    )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail.startswith("Airflow answered 422: bad conf\\n")
    assert len(detail) < 400
