"""What a read-only user sees, who may frame the pages, and the origin behind a proxy.

`vic` stands for an Airflow Viewer (tests.ui.conftest.READ_ONLY): every page and JSON
endpoint answers, the replay controls are replaced by a note that says which role it
takes, and a replay posted anyway is refused before anything reaches Airflow.
"""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.ledger_fixtures import Sample
from tests.ui.conftest import FakeAirflow, make_client, ui_settings

NOTE = "Read only: replaying needs an Airflow role that may trigger the DAG ackfold_manual_replay"
REFUSED = "vic may read these pages, but replaying needs an Airflow role that may trigger"


def _csrf(text: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', text)
    assert match is not None
    return match.group(1)


def test_a_viewer_reads_every_page_without_replay_controls(
    sample: Sample, airflow: FakeAirflow
) -> None:
    with make_client(ui_settings(sample.warehouse), airflow, token="jwt-vic") as vic:
        pages = {
            path: vic.get(path)
            for path in (
                "/overview", "/roots", f"/roots/{sample.dead}", "/dead-letters", "/quality",
                "/api/overview", "/api/roots", f"/api/roots/{sample.dead}",
                "/api/dead-letters", "/api/quality", "/api/apps", "/api/csrf",
            )
        }  # fmt: skip
    for path, response in pages.items():
        assert response.status_code == 200, (path, response.text[:300])
    for path in ("/roots", f"/roots/{sample.dead}", "/dead-letters"):
        html = pages[path].text
        assert 'id="replay-selected"' not in html, path
        assert 'id="replay-filter"' not in html, path
        assert NOTE in html, path
    assert airflow.calls == []


def test_a_viewers_replay_is_refused_before_airflow_is_called(
    sample: Sample, airflow: FakeAirflow
) -> None:
    with make_client(ui_settings(sample.warehouse), airflow, token="jwt-vic") as vic:
        token = _csrf(vic.get("/roots").text)
        form = {"csrf_token": token, "root_id": str(sample.dead), "dry_run": "1"}
        origin = {"Origin": "http://testserver"}
        confirm = vic.post("/replay", data=form, headers=origin)
        trigger = vic.post("/replay/confirm", data=form, headers=origin)
        api = vic.post(
            "/api/replay",
            json={"root_ids": [str(sample.dead)]},
            headers={**origin, "X-CSRF-Token": token},
        )
    for response in (confirm, trigger):
        assert response.status_code == 403
        assert REFUSED in response.text
        assert "(User, Op or Admin): ask an Airflow admin" in response.text
    assert api.status_code == 403
    assert api.json()["detail"].startswith(REFUSED)
    assert airflow.calls == []


def test_a_user_who_may_trigger_sees_the_controls(sample: Sample, airflow: FakeAirflow) -> None:
    with make_client(ui_settings(sample.warehouse), airflow) as ann:
        html = ann.get("/roots").text
    assert 'id="replay-selected"' in html
    assert NOTE not in html


def test_pages_may_be_framed_by_airflows_ui_only_and_nothing_else_at_all(
    sample: Sample, airflow: FakeAirflow
) -> None:
    with make_client(ui_settings(sample.warehouse), airflow, prefix="/ackfold") as c:
        page = c.get("/ackfold/roots")
        error = c.get("/ackfold/roots?since=0001-01-01T00:00:00%2B01:00")
        api = c.get("/ackfold/api/roots")
        static = c.get("/ackfold/static/ackfold.css")
    for response in (page, error):
        assert response.headers["content-security-policy"].endswith("; frame-ancestors 'self'")
        assert response.headers["x-frame-options"] == "SAMEORIGIN"
    # The bounded time: the input is blamed (400), not the ledger.
    assert error.status_code == 400
    assert "is out of range: give a time from 1970-01-01 up to 2200-01-01" in error.text
    for response in (api, static):
        assert response.headers["content-security-policy"].endswith("; frame-ancestors 'none'")
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/roots?since=0001-01-01T00:00:00%2B01:00", "since"),
        ("/api/roots?until=9999-12-31T23:59:59Z", "until"),
        ("/api/overview?since=0001-01-01", "since"),
        ("/api/dead-letters?until=9999-12-31", "until"),
    ],
)
def test_times_at_the_calendars_edge_are_the_inputs_fault(
    client: TestClient, path: str, field: str
) -> None:
    response = client.get(path)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert (
        "is out of range: give a time from 1970-01-01 up to 2200-01-01 (UTC)"
        in (response.json()["detail"])
    )


def test_a_replay_filter_at_the_calendars_edge_is_the_inputs_fault(
    client: TestClient, sample: Sample, airflow: FakeAirflow
) -> None:
    token = _csrf(client.get("/roots").text)
    response = client.post(
        "/replay",
        data={"csrf_token": token, "scope": "filter", "since": "0001-01-01T00:00:00+01:00"},
        headers={"Origin": "http://testserver"},
    )
    assert response.status_code == 400
    assert "is out of range" in response.text
    assert airflow.calls == []


def test_behind_a_proxy_the_base_urls_origin_may_post(sample: Sample, airflow: FakeAirflow) -> None:
    """The proxy rewrites Host to the api-server's; the browser's Origin is the public
    address, `[api] base_url`, which the plugin allows (`airflow_auth.app_options`)."""
    public = "https://airflow.example.com"
    settings = ui_settings(sample.warehouse)
    for allowed, expected in (([public], 200), ([], 403)):
        with make_client(settings, airflow, allowed_origins=allowed) as ann:
            token = _csrf(ann.get("/roots").text)
            response = ann.post(
                "/replay/confirm",
                data={"csrf_token": token, "root_id": str(sample.dead), "dry_run": "1"},
                headers={"Host": "airflow-apiserver:8080", "Origin": public},
            )
        assert response.status_code == expected, response.text
    assert len(airflow.calls) == 1
