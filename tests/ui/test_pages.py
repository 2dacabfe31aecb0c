"""The read pages and their JSON: filters, sort, paging, errors, the empty ledger."""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ackfold.ledger.schema import status
from ackfold.ledger.schema.ids import format_id, parse_id
from ackfold.ledger.schema.values import iso
from ackfold.ui import queries
from ackfold.ui.filters import UNHEALTHY
from ackfold.ui.queries import UiReader
from tests.ledger_fixtures import DAY2, DAY3, Sample, bulk_ledger
from tests.ui.conftest import FakeAirflow, make_client, ui_settings
from tests.ui.odd_ledger import odd_ledger


def ids(body: dict) -> list[int]:
    return [parse_id(root["root_id"]) for root in body["roots"]]


def test_roots_default_to_the_unhealthy_statuses_newest_first(
    client: TestClient, sample: Sample
) -> None:
    body = client.get("/api/roots").json()
    assert body["filter"]["statuses"] == list(UNHEALTHY)
    # Not the replayed root: it is history, its new attempt (completed) is what counts.
    assert ids(body) == [sample.dead, sample.timed_out]
    assert body["total"] == 2
    assert "replayed" not in UNHEALTHY


def test_roots_filter_by_app_status_time_and_stage(client: TestClient, sample: Sample) -> None:
    def get(**params: str | list[str]) -> list[int]:
        response = client.get("/api/roots", params=params)
        assert response.status_code == 200, response.text
        return ids(response.json())

    assert get(app="clicks") == [sample.dead, sample.timed_out]
    assert get(status=["completed", "pending"]) == [sample.pending, sample.retry, sample.completed]
    assert get(status="completed,replayed", until=iso(DAY2)) == [sample.replayed, sample.completed]
    assert get(since=iso(DAY2 + timedelta(hours=1))) == [sample.dead, sample.timed_out]
    assert get(stage="sink") == []
    assert get(stage="sink", status="replayed") == [sample.replayed]
    assert get(app="nope") == []


def test_roots_sort_and_pages(client: TestClient, sample: Sample) -> None:
    everything = ",".join(status.ALL)
    asc = ids(
        client.get(
            "/api/roots", params={"status": everything, "sort": "root_id", "order": "asc"}
        ).json()
    )
    assert asc == sorted(sample.statuses)
    desc = client.get(
        "/api/roots", params={"status": everything, "sort": "first_event_at", "order": "desc"}
    ).json()
    firsts = [root["first_event_at"] for root in desc["roots"]]
    assert firsts == sorted(firsts, reverse=True)

    pages, offset = [], 0
    while True:
        params = {"status": everything, "limit": "2", "offset": str(offset)}
        body = client.get("/api/roots", params=params).json()
        pages.append(ids(body))
        assert body["total"] == len(sample.statuses)
        if not body["more"]:
            break
        offset += 2
    assert [len(p) for p in pages] == [2, 2, 2]
    newest = ids(client.get("/api/roots", params={"status": everything}).json())
    assert [i for p in pages for i in p] == newest


def test_roots_page_links_rows_to_their_root_page(client: TestClient, sample: Sample) -> None:
    html = client.get("/roots").text
    rows = re.findall(r'data-testid="root-row" data-root-id="(0x[0-9a-f]{16})"', html)
    assert [parse_id(r) for r in rows] == [sample.dead, sample.timed_out]
    dead = format_id(sample.dead)
    assert f'href="/roots/{dead}">{dead}</a>' in html
    assert f'id="select-{dead}" name="root_id" value="{dead}"' in html


SCRIPT = "<script>alert(1)</script>"
ONLOAD = '"><svg onload=alert(1)>'


def test_markup_in_the_ledger_is_escaped_on_every_page(
    tmp_path: Path, airflow: FakeAirflow
) -> None:
    # The stage leads with the attribute breaker: the timeline shows 20 characters of it.
    odd = odd_ledger(
        tmp_path / "w",
        app=f"{SCRIPT}{ONLOAD}",
        stage=f"{ONLOAD}{SCRIPT}",
        reason=f"bad record {SCRIPT} {ONLOAD}",
    )
    escaped = {
        "script": "&lt;script&gt;alert(1)&lt;/script&gt;",
        "onload": "&#34;&gt;&lt;svg onload=alert(1)&gt;",
    }
    with make_client(ui_settings(odd.warehouse), airflow) as c:
        pages = {
            "/roots": c.get("/roots"),
            "/roots/{id}": c.get(f"/roots/{odd.root_id}"),
            "/overview": c.get("/overview"),
            "/overview?app": c.get("/overview", params={"app": odd.app}),
            "/dead-letters": c.get("/dead-letters"),
        }
    for name, response in pages.items():
        assert response.status_code == 200, name
        html = response.text.lower()
        assert "<script>alert" not in html, name
        assert "<svg onload" not in html, name
        assert "onload=alert(1)>" not in html.replace("onload=alert(1)&gt;", ""), name
        assert escaped["script"] in response.text, name
        assert escaped["onload"] in response.text, name
    root = pages["/roots/{id}"].text
    timeline = root[root.index('id="root-timeline"') :]
    timeline = timeline[: timeline.index("</svg>")]
    assert '<text class="stage"' in timeline
    assert "&#34;&gt;&lt;svg onload=alert(" in timeline  # the stage, cut and escaped
    assert f"{escaped['script']} {escaped['onload']}" in timeline  # the fail's tooltip
    assert f'id="select-{format_id(odd.root_id)}"' in pages["/dead-letters"].text


def test_bad_filters_are_400_naming_the_field(client: TestClient) -> None:
    for params, name in [
        ({"status": "failed,bogus"}, "status"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-11-22T00:00:00Z", "until": "2026-11-21T00:00:00Z"}, "until"),
        ({"limit": "0"}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"sort": "payload; DROP TABLE root_state"}, "sort"),
        ({"order": "sideways"}, "order"),
        ({"offset": "-1"}, "offset"),
    ]:
        response = client.get("/api/roots", params=params)
        assert response.status_code == 400, params
        assert response.json()["field"] == name
        page = client.get("/roots", params=params)
        assert page.status_code == 400
        assert f'<code id="error-field">{name}</code>' in page.text


def test_unknown_root_is_404_and_a_malformed_one_400(client: TestClient) -> None:
    response = client.get("/api/roots/123")
    assert response.status_code == 404
    assert "no root 0x000000000000007b" in response.json()["detail"]
    page = client.get("/roots/123")
    assert page.status_code == 404
    assert "no root 0x000000000000007b" in page.text
    assert client.get("/api/roots/xyz").status_code == 400
    assert client.get("/api/roots/18446744073709551616").status_code == 400, "not a 500"


def test_root_page_shows_the_journey(client: TestClient, sample: Sample) -> None:
    body = client.get(f"/api/roots/{sample.retry}").json()
    assert body["state"]["status"] == status.COMPLETED
    assert [parse_id(a["root_id"]) for a in body["attempts"]] == [sample.replayed, sample.retry]
    assert [stage["stage"] for stage in body["stages"]] == ["spout", "parse", "sink"]
    html = client.get(f"/roots/{sample.retry}").text
    assert html.count('data-testid="attempt-link"') == 2
    assert f'href="/roots/{format_id(sample.replayed)}"' in html
    assert f'<h1 class="mono">Root {format_id(sample.retry)} ' in html
    # Every form a person may paste finds the same root.
    unsigned = sample.retry & ((1 << 64) - 1)
    for form in (str(sample.retry), str(unsigned), format_id(sample.retry)[2:]):
        assert client.get(f"/api/roots/{form}").json()["root_id"] == format_id(sample.retry)
    assert '<svg class="chart"' in html
    assert 'id="root-timeline"' in html


def test_overview_counts_latency_and_chart(client: TestClient, sample: Sample) -> None:
    body = client.get("/api/overview").json()
    assert body["apps"] == ["clicks", "orders"]
    expected = {name: list(sample.statuses.values()).count(name) for name in status.ALL}
    assert body["counts"] == expected
    assert body["ingested"] == len(sample.statuses)
    # completed: the first order (2 s from init to its last ack) and the retry (5 s).
    assert (body["p50_seconds"], body["p99_seconds"]) == (3.5, 5.0)
    assert sum(sum(b["counts"].values()) for b in body["buckets"]) == len(sample.statuses)
    clicks = client.get("/api/overview", params={"app": "clicks"}).json()
    assert clicks["ingested"] == 2
    assert clicks["p50_seconds"] is None
    later = client.get("/api/overview", params={"since": iso(DAY3)}).json()
    assert later["ingested"] == 2
    assert later["bucket_seconds"] < body["bucket_seconds"]
    html = client.get("/overview", params={"app": "orders"}).text
    assert 'id="count-completed">2<' in html
    assert '<svg class="chart"' in html


def test_overview_buckets_adapt_to_the_span(tmp_path: Path, airflow: FakeAirflow) -> None:
    bulk_ledger(tmp_path / "w", roots_per_day=50, days=5)
    with make_client(ui_settings(tmp_path / "w"), airflow) as c:
        body = c.get("/api/overview").json()
    assert body["bucket_seconds"] == 3 * 3600  # 5 days in at most 48 buckets
    assert len(body["buckets"]) <= 48
    assert body["ingested"] == 250


def test_the_all_time_overview_counts_from_the_log_what_a_scan_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every app over all time (the landing page): its counts come from the row counts
    of `root_state`'s files, one day and status partition each, without reading a row;
    the same buckets and counts as the aggregation a narrower view runs. Over many
    completed roots, the latency is that of a uniform sample of them."""
    bulk_ledger(tmp_path / "w", roots_per_day=24, days=30)
    reader = UiReader(str(tmp_path / "w"))
    everything = reader.overview(None)
    assert everything.bucket_seconds == 86400  # whole days: one bucket per partition date
    counted = [scan.sql for scan in reader.scans if "count(*)" in scan.sql]
    assert counted == [], "all time, every app: the counts come from the Delta log"
    assert sum(everything.counts.values()) == everything.ingested == 24 * 30
    first = everything.buckets[0].start
    scanned = reader.overview(None, since=first)  # the same roots, by an aggregation
    assert [(b.start, b.counts) for b in scanned.buckets] == [
        (b.start, b.counts) for b in everything.buckets
    ]
    assert reader.scans[-2].sql.startswith("SELECT app, date_bin")
    # Every root of the bulk ledger completes 30 s after its first event.
    assert (everything.p50_seconds, everything.p99_seconds) == (30.0, 30.0)
    assert "root_id %" not in reader.scans[-1].sql
    monkeypatch.setattr(queries, "LATENCY_SAMPLE", 20)
    sampled = reader.overview(None)
    assert "root_id % " in reader.scans[-1].sql
    assert sampled.counts == everything.counts, "the counts are never sampled"
    assert (sampled.p50_seconds, sampled.p99_seconds) == (30.0, 30.0)
    # One app over all time: one aggregation grouped by app counts its roots and names
    # every app (no second scan for the page's app list); its latency sample is its own.
    reader = UiReader(str(tmp_path / "w"))
    orders = reader.overview("orders")
    scanned = len(reader.scans)
    assert reader.apps() == ["clicks", "orders"]
    assert len(reader.scans) == scanned, "the app list came with the counts"
    n_of = Counter(status.ALL[n % len(status.ALL)] for n in range(0, 24 * 30, 2))  # even n
    assert {name: n for name, n in orders.counts.items() if n} == dict(n_of)
    # Too few of its own in a sample of every app's (1 in 6 of 102): sampled alone.
    assert "app = 'orders'" in reader.scans[-1].sql
    assert "root_id % 3 = 0" in reader.scans[-1].sql  # 51 completed: a sample of about 20
    assert (orders.p50_seconds, orders.p99_seconds) == (30.0, 30.0)
    monkeypatch.setattr(queries, "LATENCY_MIN_SAMPLE", 5)  # enough: every app's sample
    shared = reader.overview("orders")
    assert "root_id % 6 = 0" in reader.scans[-1].sql
    assert "app =" not in reader.scans[-1].sql
    assert (shared.counts, shared.p50_seconds, shared.p99_seconds) == (orders.counts, 30.0, 30.0)
    # The next request at the same version reads no row for the apps; a new one does.
    again = UiReader(str(tmp_path / "w"))
    assert (again.apps(), again.scans) == (["clicks", "orders"], [])
    bulk_ledger(tmp_path / "w", roots_per_day=1, days=1, apps=("payments",))
    assert UiReader(str(tmp_path / "w")).apps() == ["clicks", "orders", "payments"]


def test_dead_letters_view(client: TestClient) -> None:
    # The sample ledger has no dead_letters table yet: an empty view, not an error.
    assert client.get("/api/dead-letters").json()["dead_letters"] == []
    assert 'id="dead-letters-empty"' in client.get("/dead-letters").text
    assert client.get("/api/dead-letters", params={"redriven": "maybe"}).status_code == 400


def test_no_ledger_is_a_friendly_empty_state(
    tmp_path: Path, empty_warehouse: Path, airflow: FakeAirflow
) -> None:
    with make_client(ui_settings(tmp_path / "nothing"), airflow) as c:
        for path in ("/roots", "/overview", f"/roots/{1}"):
            page = c.get(path)
            assert page.status_code == 200, path
            assert 'id="empty-state"' in page.text, path
        api = c.get("/api/roots")
        assert api.status_code == 404
        assert api.json()["no_ledger"] is True
    # Tables but no root yet: the pages render, with nothing in them.
    with make_client(ui_settings(empty_warehouse), airflow) as c:
        assert 'id="roots-empty"' in c.get("/roots").text
        assert c.get("/api/overview").json()["ingested"] == 0


def test_replay_all_matching_is_off_when_most_matches_cannot_be_replayed(
    tmp_path: Path, airflow: FakeAirflow
) -> None:
    # 3 failed roots, 27 replayed ones (history): replaying "all matching" would send 3.
    bulk_ledger(
        tmp_path / "w",
        roots_per_day=30,
        days=1,
        statuses=lambda i: status.FAILED if i < 3 else status.REPLAYED,
    )
    with make_client(ui_settings(tmp_path / "w"), airflow) as c:
        mixed = c.get("/roots", params={"status": ["failed", "replayed"]}).text
        failed = c.get("/roots", params={"status": "failed"}).text
        none = c.get("/roots", params={"status": "replayed"}).text
    button = re.search(r'<button id="replay-filter"[^>]*>([^<]*)</button>', mixed)
    assert button is not None
    assert "disabled" in button.group(0)
    assert 'data-replayable="3"' in button.group(0)
    assert "Only 3 of the 30 matching roots can be replayed" in mixed
    assert 'id="replay-filter-note"' not in failed
    on = re.search(r'<button id="replay-filter"[^>]*>', failed)
    assert on is not None
    assert "disabled" not in on.group(0)
    assert "None of the 27 matching roots can be replayed" in none


def test_an_empty_page_shows_no_range(client: TestClient) -> None:
    for path in ("/dead-letters?app=nope", "/roots?app=nope"):
        html = client.get(path).text
        assert "0–0" not in html
        assert "1–0" not in html
    assert "1–3" in client.get("/roots", params={"status": ",".join(status.ALL), "limit": 3}).text


def test_the_overview_before_the_first_reconcile_says_why_it_is_empty(
    empty_warehouse: Path, airflow: FakeAirflow
) -> None:
    with make_client(ui_settings(str(empty_warehouse)), airflow) as c:
        response = c.get("/overview")
    assert response.status_code == 200
    note = re.search(r'<p class="notice" id="overview-empty">(.*?)</p>', response.text, re.S)
    assert note is not None
    assert "ackfold_reconcile" in note.group(1)
    assert 'id="chart-latency"' not in response.text


def test_the_latency_chart_draws_both_series(client: TestClient) -> None:
    html = client.get("/overview").text
    series = dict(re.findall(r'data-series="(p\d+)" data-points="(\d+)"', html))
    assert set(series) == {"p50", "p99"}
    assert series["p50"] == series["p99"] != "0"
    # p99 first, p50 over it: where they are equal, both still show.
    assert html.index('data-series="p99"') < html.index('data-series="p50"')
