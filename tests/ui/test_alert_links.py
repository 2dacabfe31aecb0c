"""What an alert links to: the roots table narrowed to the alert's roots (`root_id=`,
any status), behind the login; and the Overview's time to detect and to recover."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from fastapi.testclient import TestClient

from ackfold.alerts.rules import roots_link
from ackfold.ledger.schema import status
from ackfold.ledger.schema.ids import format_id, parse_id
from tests.alert_fixtures import ago, state, write_state
from tests.ledger_fixtures import Sample
from tests.ui.conftest import HOST, FakeAirflow, make_client, ui_settings


def test_an_alerts_link_shows_its_roots_in_any_status(client: TestClient, sample: Sample) -> None:
    link = roots_link("orders", [sample.replayed, sample.completed])
    body = client.get("/api" + link).json()
    assert sorted(parse_id(root["root_id"]) for root in body["roots"]) == sorted(
        [sample.replayed, sample.completed]
    )
    assert body["filter"]["root_ids"] == [format_id(sample.replayed), format_id(sample.completed)]
    assert body["filter"]["statuses"] == list(status.ALL)
    page = client.get(link)
    assert page.status_code == 200
    assert 'id="filter-root-ids"' in page.text
    # Paging, sorting and the filter form keep the ids; "Show every root" drops them.
    assert f'name="root_id" value="{format_id(sample.replayed)}"' in page.text
    clear = re.search(r'id="filter-root-ids-clear" href="([^"]+)"', page.text)
    assert clear is not None
    assert "root_id" not in clear.group(1)
    # A status given explicitly still narrows; too many ids are refused, naming the field.
    completed = client.get(f"/api{link}&status=completed").json()
    assert [root["root_id"] for root in completed["roots"]] == [format_id(sample.completed)]
    many = "&".join(f"root_id={i}" for i in range(1, 102))
    refused = client.get(f"/api/roots?{many}")
    assert refused.status_code == 400
    assert "root_id" in refused.text


def test_an_alerts_link_needs_the_login_and_comes_back_to_it(
    sample: Sample, airflow: FakeAirflow
) -> None:
    link = roots_link("orders", [sample.replayed])
    with make_client(ui_settings(sample.warehouse), airflow, token=None) as anonymous:
        page = anonymous.get(link)
        assert page.status_code == 303
        login = urlsplit(page.headers["location"])
        assert login.path == "/auth/login"
        assert parse_qs(login.query)["next"] == [f"http://{HOST}{link}"]
        assert anonymous.get("/api" + link).status_code == 401


def test_the_overview_shows_time_to_detect_and_to_recover(
    tmp_path: Path, airflow: FakeAirflow
) -> None:
    warehouse = tmp_path / "w"
    write_state(
        warehouse,
        [
            # Due at its fail event 30 minutes ago, marked 28: detected in 2 minutes;
            # replayed, and its attempt 2 completed 20 minutes ago: recovered in 10.
            state(1, "orders", status.REPLAYED, ago(30), ago(26), fail_at=ago(30),
                  reconciled=ago(28)),
            state(2, "orders", status.COMPLETED, ago(25), ago(19), last=ago(20), attempt=2,
                  origin=1),
            # Timed out (5 minutes after its first event), marked 4 minutes later.
            state(3, "orders", status.TIMED_OUT, ago(15), ago(6)),
            state(4, "orders", status.COMPLETED, ago(9), ago(8), last=ago(9)),
        ],
    )  # fmt: skip
    with make_client(ui_settings(warehouse), airflow) as c:
        body = c.get("/api/overview").json()
        html = c.get("/overview").text
        orders = c.get("/api/overview", params={"app": "clicks"}).json()
    assert body["recovery"] == {
        "detect": {"count": 2, "p50": 180.0, "p99": 238.8},
        "recover": {"count": 1, "p50": 600.0, "p99": 600.0},
        "unrecovered": 1,
    }
    assert 'id="detect-p50">3m<' in html
    assert 'id="recover-p99">10m<' in html
    assert 'id="count-unrecovered">1<' in html
    assert orders["recovery"]["detect"] == {"count": 0, "p50": None, "p99": None}
