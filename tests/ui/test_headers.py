"""What every response tells the browser: what a page may load (no CDN, no inline
script), where links may carry the page's address, and that nothing showing a payload is
cached; and what an expired login sees."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from fastapi.testclient import TestClient

from tests.ledger_fixtures import Sample
from tests.ui.conftest import FakeAirflow, make_client, ui_settings


def directives(policy: str) -> dict[str, str]:
    parts = (p.strip().split(" ", 1) for p in policy.split(";") if p.strip())
    return {p[0]: p[1] if len(p) > 1 else "" for p in parts}


def test_pages_load_only_from_this_server_and_are_never_cached(
    client: TestClient, sample: Sample
) -> None:
    for path in (
        "/overview",
        "/roots",
        f"/roots/{sample.dead}",
        "/dead-letters",
        "/quality",
        "/roots?limit=0",  # an error page
    ):
        response = client.get(path)
        policy = directives(response.headers["content-security-policy"])
        assert policy["default-src"] == "'self'", path
        assert policy["script-src"] == "'self'", path
        assert policy["style-src"] == "'self'", path
        assert policy["object-src"] == "'none'"
        assert policy["base-uri"] == "'none'"
        assert policy["form-action"] == "'self'"
        assert policy["frame-ancestors"] == "'self'"
        assert response.headers["referrer-policy"] == "same-origin"
        assert response.headers["cache-control"] == "no-store", path
        # Everything the page loads is this app's own, and nothing is inline.
        html = response.text
        assert "<script>" not in html
        assert "javascript:" not in html
        assert not re.search(r"\son[a-z]+=", html), path
        assert not re.search(r"\sstyle=", html), path
        for src in re.findall(r'(?:src|href)="(https?:)?//', html):
            raise AssertionError(f"{path} loads from another origin: {src}")


def test_json_loads_nothing_and_is_never_cached(client: TestClient, sample: Sample) -> None:
    for path in ("/api/roots", f"/api/roots/{sample.dead}", "/api/overview", "/api/csrf"):
        response = client.get(path)
        policy = directives(response.headers["content-security-policy"])
        assert policy["default-src"] == "'none'"
        assert policy["frame-ancestors"] == "'none'"
        assert response.headers["cache-control"] == "no-store", path
        assert response.headers["referrer-policy"] == "same-origin"
    static = client.get("/static/ackfold.css")
    assert static.headers["cache-control"].startswith("private")


def test_an_expired_login_on_a_page_goes_to_the_login_page(
    sample: Sample, airflow: FakeAirflow
) -> None:
    with make_client(ui_settings(sample.warehouse), airflow, token="jwt-expired") as c:
        for path in ("/overview", "/roots?app=orders", f"/roots/{sample.dead}", "/quality"):
            page = c.get(path)
            assert page.status_code == 303, path
            assert urlsplit(page.headers["location"]).path == "/auth/login"
        api = c.get("/api/roots")
        assert api.status_code == 401
        assert api.json()["detail"]
