"""What a security review throws at the UI: each gets a 4xx with a clear message, never a
500 with a traceback, and nothing lands in the HTML unescaped or names a server path."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.ledger_fixtures import Sample
from tests.ui.conftest import FakeAirflow, make_client, ui_settings

HUGE = "9" * 5000  # past Python's limit of 4,300 digits for int(str)
CONTROL = ["a\x00b", "x\x1by", "\x7f", "tab\there"]


def script(sample: Sample, airflow: FakeAirflow) -> tuple[TestClient, dict[str, str]]:
    client = make_client(ui_settings(sample.warehouse), airflow, token=None)
    auth = {"Authorization": "Bearer jwt-ann"}
    token = client.get("/api/csrf", headers=auth).json()["csrf_token"]
    return client, {**auth, "X-CSRF-Token": token}


def test_a_root_id_of_thousands_of_digits_is_400(client: TestClient) -> None:
    for path in (f"/roots/{HUGE}", f"/roots/-{HUGE}", f"/roots/0x{HUGE}"):
        page = client.get(path)
        assert page.status_code == 400, path
        assert "root id" in page.text
        assert HUGE not in page.text
        api = client.get(f"/api{path}")
        assert api.status_code == 400, path
        assert "root id" in api.json()["detail"]
    for root_id in (HUGE, f"{HUGE},1"):
        response = client.get("/api/roots", params={"root_id": root_id})
        assert response.status_code == 400
        assert response.json()["field"] == "root_id"
        page = client.get("/roots", params={"root_id": root_id})
        assert page.status_code == 400
        assert '<code id="error-field">root_id</code>' in page.text


def test_replay_bodies_that_are_not_json_objects_are_400(
    sample: Sample, airflow: FakeAirflow
) -> None:
    client, headers = script(sample, airflow)
    with client:
        bodies = {
            "not utf-8": b'{"root_ids": ["\xff\xfe"]}',
            "not json": b"{root_ids",
            "nested": b"[" * 100_000 + b"]" * 100_000,
            "nested object": b'{"filter": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001,
            "huge number": b'{"root_ids": [' + HUGE.encode() + b"]}",
            "huge number in a filter": b'{"filter": {"limit": ' + HUGE.encode() + b"}}",
            "huge id": b'{"root_ids": ["' + HUGE.encode() + b'"]}',
            "id out of range": b'{"root_ids": ["99999999999999999999999"]}',
            "control characters in a filter": b'{"filter": {"app": "a\\u0000b"}}',
        }
        for what, body in bodies.items():
            response = client.post(
                "/api/replay", content=body, headers={**headers, "Content-Type": "application/json"}
            )
            assert 400 <= response.status_code < 500, (what, response.status_code)
            detail = response.json()["detail"]
            assert detail, what
            assert len(detail) < 400, what
            assert HUGE not in detail
    assert airflow.calls == []


def test_control_characters_in_filters_are_refused_and_never_echoed(client: TestClient) -> None:
    for name in ("app", "stage"):
        for value in CONTROL:
            api = client.get("/api/roots", params={name: value})
            assert api.status_code == 400, (name, value)
            assert api.json()["field"] == name
            assert "control character" in api.json()["detail"]
            page = client.get("/roots", params={name: value})
            assert page.status_code == 400
            assert value not in page.text
            assert "\x00" not in page.text
    page = client.get("/dead-letters", params={"app": "a\x00b"})
    assert page.status_code == 400
    assert "\x00" not in page.text
    assert client.get("/overview", params={"app": "a\x00b"}).status_code == 400
    page = client.get("/roots/1%00")
    assert page.status_code == 400
    assert "\x00" not in page.text


def test_a_root_not_found_does_not_reveal_where_the_warehouse_is(
    client: TestClient, sample: Sample
) -> None:
    where = str(sample.warehouse)
    api = client.get("/api/roots/123")
    assert api.status_code == 404
    assert "no root 0x000000000000007b" in api.json()["detail"]  # 123, as ids are shown
    page = client.get("/roots/123")
    assert page.status_code == 404
    for text in (api.text, page.text):
        assert where not in text
        assert not re.search(r"(?<![\w<])/(tmp|home|work|var|root)/", text), text


def test_an_empty_warehouse_does_not_reveal_its_path(
    empty_warehouse: object, airflow: FakeAirflow
) -> None:
    with make_client(ui_settings(str(empty_warehouse)), airflow) as client:
        for path in ("/roots", "/api/roots", "/overview"):
            response = client.get(path)
            assert str(empty_warehouse) not in response.text, path
