"""Login, CSRF and the replay trigger; the payload preview's redaction."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from ackfold.ledger.schema import status
from ackfold.ledger.schema.ids import format_id, parse_id
from ackfold.quality.docs_assets import STATIC
from ackfold.replay.params import parse_replay_conf
from ackfold.ui import replay_pages
from ackfold.ui.redact import MASK, Redactor
from tests.ledger_fixtures import Sample, bulk_ledger
from tests.ui.conftest import HOST, SAME_ORIGIN, FakeAirflow, csrf, make_client, ui_settings
from tests.ui.odd_ledger import odd_ledger


def test_anonymous_requests_are_refused(sample: Sample, airflow: FakeAirflow) -> None:
    with make_client(ui_settings(sample.warehouse), airflow, token=None) as anonymous:
        page = anonymous.get("/roots", params={"app": "orders"})
        assert page.status_code == 303
        login = urlsplit(page.headers["location"])
        assert login.path == "/auth/login"
        assert parse_qs(login.query)["next"] == [f"http://{HOST}/roots?app=orders"]
        for path in ("/api/roots", "/api/overview", f"/api/roots/{sample.dead}", "/api/csrf"):
            assert anonymous.get(path).status_code == 401, path
        # A form posted after the login expired: log in, then back to the form's page.
        posted = anonymous.post(
            "/replay/confirm",
            data={"root_id": str(sample.dead)},
            headers={"Referer": f"http://{HOST}/roots?app=clicks"},
        )
        assert posted.status_code == 303
        login = urlsplit(posted.headers["location"])
        assert parse_qs(login.query)["next"] == [f"http://{HOST}/roots?app=clicks"]
        foreign = anonymous.post("/replay", headers={"Referer": "http://evil.example/x"})
        assert parse_qs(urlsplit(foreign.headers["location"]).query)["next"] == [
            f"http://{HOST}/roots"
        ]
    assert airflow.calls == []


def test_every_route_needs_a_login(sample: Sample, airflow: FakeAirflow) -> None:
    """Walks every route of the app, anonymously: a route that forgets the viewer
    dependency answers something else than the login's 401 (API) or redirect (pages)."""
    # A valid value for each path parameter: a new parameter fails here until it has one.
    values = {
        "root_id": str(sample.dead),
        "name": "ackfold.css",
        "path": "index.html",
        "app": "orders",
        "run_id": "manual__run1",
    }
    walked = []
    with make_client(ui_settings(sample.warehouse), airflow, token=None) as anonymous:
        app = anonymous.app
        assert isinstance(app, FastAPI)
        routes = [route for route in app.routes if isinstance(route, APIRoute)]
        assert len(routes) == len(app.routes) >= 15
        for route in routes:
            names = re.findall(r"{(\w+)(?::\w+)?}", route.path)
            assert set(names) <= set(values), f"{route.path}: give its parameters a value"
            path = re.sub(r"{(\w+)(?::\w+)?}", lambda m: values[m.group(1)], route.path)
            for method in sorted(route.methods):
                response = anonymous.request(method, path)
                walked.append((method, route.path))
                if route.path.startswith("/api/"):
                    assert response.status_code == 401, (method, path)
                    assert response.json()["detail"] == "Not authenticated"
                elif route.path.startswith(f"/quality/docs/{STATIC}/"):
                    # Asked by sandboxed pages, which send no login: a page served to a
                    # logged-in user signs its links (tests/ui/test_quality_pages.py).
                    assert response.status_code == 403, (method, path)
                    assert "not valid" in response.text
                else:
                    assert response.status_code == 303, (method, path)
                    assert urlsplit(response.headers["location"]).path == "/auth/login"
    assert ("POST", "/replay/confirm") in walked
    assert ("GET", "/roots/{root_id}") in walked
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
    assert conf["root_ids"] == [format_id(sample.dead)]
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
    hidden = re.findall(r'name="root_id" value="(0x[0-9a-f]{16})"', confirm.text)
    assert sorted(parse_id(i) for i in hidden) == sorted([sample.dead, sample.timed_out])


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
        # Too many ids, or one that is no id: the error names the body's field, root_ids.
        too_many = [str(i) for i in range(1, 2001)]
        for ids, why in ((too_many, "2000 roots: at most 1000"), (["0xnope"], "0xnope")):
            refused = script.post(
                "/api/replay", json={"root_ids": ids}, headers={**auth, "X-CSRF-Token": token}
            )
            assert refused.status_code == 400, refused.text
            assert refused.json()["field"] == "root_ids", refused.json()
            assert why in refused.text
    assert len(airflow.calls) == 1
    assert airflow.calls[0]["body"]["conf"]["root_ids"] == [format_id(sample.timed_out)]


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

    from ackfold.ui import app, charts, filters, lazy, redact, results

    for module in (app, charts, filters, lazy, redact, results):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
        assert result.attempted > 0, module.__name__


def test_fail_and_event_reasons_are_redacted_everywhere(
    tmp_path: Path, airflow: FakeAirflow
) -> None:
    odd = odd_ledger(
        tmp_path / "w",
        app="orders",
        stage="parse",
        reason='bad record {"user": "ann", "password": "hunter2"} card 4111-1111',
        event_reason='choked on {"Password": "hunter2", "n": 1} with tok_SECRET9',
    )
    settings = ui_settings(
        odd.warehouse,
        redact_keys=["password"],
        redact_patterns=[r"\b\d{4}-\d{4}\b", r"tok_[A-Z0-9]+"],
    )
    with make_client(settings, airflow) as c:
        responses = {
            path: c.get(path)
            for path in (
                "/roots",
                f"/roots/{odd.root_id}",
                "/dead-letters",
                "/api/roots",
                f"/api/roots/{odd.root_id}",
                "/api/dead-letters",
            )
        }
    for path, response in responses.items():
        assert response.status_code == 200, path
        for secret in ("hunter2", "4111-1111", "tok_SECRET9"):
            assert secret not in response.text, (path, secret)
    masked = f'bad record {{"user": "ann", "password": {MASK}}} card {MASK}'
    assert responses["/api/roots"].json()["roots"][0]["fail_reason"] == masked
    assert responses["/api/dead-letters"].json()["dead_letters"][0]["reason"] == masked
    journey = responses[f"/api/roots/{odd.root_id}"].json()
    assert journey["state"]["fail_reason"] == masked
    [fail] = [e for s in journey["stages"] for e in s["events"] if e["kind"] == "fail"]
    assert fail["reason"] == f'choked on {{"Password": {MASK}, "n": 1}} with {MASK}'
    page = responses[f"/roots/{odd.root_id}"].text
    assert f"choked on {{&#34;Password&#34;: {MASK}, &#34;n&#34;: 1}} with {MASK}" in page
    assert "ann" in responses["/roots"].text  # the rest of the reason is shown


@pytest.mark.parametrize(
    ("referer", "prefix", "back"),
    [
        (
            f"http://{HOST}/roots?app=clicks&status=failed",
            "",
            "/roots?app=clicks&amp;status=failed",
        ),
        ("http://evil.example/roots", "", "/roots"),
        ("https://evil.example/phish?x=1", "/ackfold", "/ackfold/roots"),
        (f"http://{HOST}//evil.example/roots", "", "/roots"),
        (f"http://{HOST}/other-app/page", "/ackfold", "/ackfold/roots"),
        (f"http://{HOST}/ackfold/dead-letters", "/ackfold", "/ackfold/dead-letters"),
        ("javascript:alert(1)//", "", "/roots"),
    ],
)
def test_the_cancel_link_stays_on_this_app(
    sample: Sample, airflow: FakeAirflow, referer: str, prefix: str, back: str
) -> None:
    with make_client(ui_settings(sample.warehouse), airflow, prefix=prefix) as c:
        response = c.post(
            f"{prefix}/replay",
            data={"csrf_token": csrf(c, f"{prefix}/roots"), "root_id": str(sample.dead)},
            headers={**SAME_ORIGIN, "Referer": referer},
        )
    assert response.status_code == 200, response.text
    assert f'<a id="cancel-replay" href="{back}">' in response.text
    assert "evil.example" not in response.text
    assert "javascript:" not in response.text


def test_replay_of_the_filter_skips_what_cannot_be_replayed_before_the_cap(
    tmp_path: Path, airflow: FakeAirflow
) -> None:
    # 3 failed roots, the oldest; 27 newer replayed ones: more than the cap of 10.
    [day] = bulk_ledger(
        tmp_path / "w",
        roots_per_day=30,
        days=1,
        statuses=lambda i: status.FAILED if i < 3 else status.REPLAYED,
    )
    settings = ui_settings(tmp_path / "w", replay_max_roots=10)
    with make_client(settings, airflow) as c:
        token = csrf(c)
        both = ["failed", "replayed"]
        confirm = c.post(
            "/replay",
            data={"csrf_token": token, "scope": "filter", "status": both},
            headers=SAME_ORIGIN,
        )
        only_replayed = c.post(
            "/replay",
            data={"csrf_token": token, "scope": "filter", "status": "replayed"},
            headers=SAME_ORIGIN,
        )
        api = c.post(
            "/api/replay",
            json={"filter": {"status": both}, "dry_run": True},
            headers={**SAME_ORIGIN, "X-CSRF-Token": token},
        )
    assert confirm.status_code == 200, confirm.text
    hidden = re.findall(r'name="root_id" value="(0x[0-9a-f]{16})"', confirm.text)
    assert sorted(parse_id(i) for i in hidden) == sorted(day[:3])
    assert 'id="confirm-count" data-count="3"' in confirm.text
    assert "27 replayed" in confirm.text
    assert only_replayed.status_code == 200
    assert 'data-count="0"' in only_replayed.text
    assert 'id="nothing-replayable"' in only_replayed.text
    assert api.status_code == 200, api.text
    selection = api.json()["selection"]
    assert sorted(parse_id(i) for i in selection["root_ids"]) == sorted(day[:3])
    assert (selection["matched"], selection["replayable"]) == (30, 3)
    assert selection["skipped"] == {"replayed": 27}


def test_the_ui_does_not_claim_who_asked(
    client: TestClient, sample: Sample, airflow: FakeAirflow, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DAG records Airflow's triggering user; the conf carries no requester, so the UI
    passes none (a `requested_by` here would be dropped on the way)."""
    seen: list[dict[str, Any]] = []

    def spy(conf: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return parse_replay_conf(conf, **kwargs)

    monkeypatch.setattr(replay_pages, "parse_replay_conf", spy)
    response = client.post(
        "/replay/confirm",
        data={"csrf_token": csrf(client), "root_id": str(sample.dead), "dry_run": "1"},
        headers=SAME_ORIGIN,
    )
    assert response.status_code == 200, response.text
    assert [set(kwargs) for kwargs in seen] == [{"apps"}]
    assert "requested_by" not in airflow.calls[0]["body"]["conf"]


def test_no_payload_reason_or_token_is_logged(
    client: TestClient, sample: Sample, airflow: FakeAirflow, caplog: pytest.LogCaptureFixture
) -> None:
    """Reading a root with a payload, and replaying one, logs who did what to how many
    roots: never the payload, the fail reason or the user's token."""
    with caplog.at_level("DEBUG"):
        assert client.get(f"/roots/{sample.completed}").status_code == 200
        assert client.get(f"/api/roots/{sample.dead}").status_code == 200
        done = client.post(
            "/replay/confirm",
            data={"csrf_token": csrf(client), "root_id": str(sample.dead), "dry_run": "1"},
            headers=SAME_ORIGIN,
        )
    assert done.status_code == 200, done.text
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "ann triggered ackfold_manual_replay run manual__run1 for 1 roots" in logged
    for secret in ('{"sku": "x"}', "geo lookup failed", "jwt-ann"):
        assert secret not in logged, secret
