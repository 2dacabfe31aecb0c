"""The pages hold what they list, at 1440 and at 1024 px wide: 50 roots, 50 dead letters
with long reasons and their redrive links, 69 quality checks with what must hold, and a
run of the real suites in which every check passed; no scroll box hides rows, nothing is
cut off or runs past the window, and no overview card sits alone on a row. Screenshots
go to test-artifacts/browser/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.ui_server import busy_ledger, passing_quality_run, serve_ui
from tests.ui.conftest import ui_settings

WIDTHS = (1440, 1024)
MIXED = "status=failed&status=replayed&status=completed"

# Everything that overflows its box, or any frame that scrolls what it holds.
OVERFLOWS = """() => {
  const out = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth + 1) out.push(`page ${doc.scrollWidth} wide`);
  for (const el of document.querySelectorAll('.table-wrap')) {
    const table = el.firstElementChild.id;
    if (el.scrollHeight > el.clientHeight + 1) out.push(`${table} scrolls rows`);
    if (el.scrollWidth > el.clientWidth + 1) out.push(`${table} scrolls sideways`);
  }
  for (const td of document.querySelectorAll('td')) {
    const text = td.textContent.trim().slice(0, 40);
    if (td.scrollWidth > td.clientWidth + 1) out.push(`cell cut: ${text}`);
  }
  for (const a of document.querySelectorAll('td a')) {
    const cell = a.closest('td').getBoundingClientRect(), box = a.getBoundingClientRect();
    if (box.right > cell.right + 1) out.push(`link cut: ${a.textContent.trim()}`);
  }
  return out;
}"""


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    var = tmp_path_factory.mktemp("layout")
    busy_ledger(var / "warehouse")
    with serve_ui(ui_settings(var / "warehouse"), airflow_url="http://airflow.test") as url:
        yield url


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def at_width(request: pytest.FixtureRequest, browser: Any, ui: str) -> Iterator[tuple[Any, int]]:
    context = browser.new_context(viewport={"width": request.param, "height": 900})
    context.add_cookies([{"name": "_token", "value": "jwt-ann", "url": ui}])
    yield context.new_page(), request.param
    context.close()


def open_page(page: Any, url: str, shoot: Any, name: str) -> Path:
    response = page.goto(url)
    assert response is not None
    assert response.status == 200, url
    return Path(shoot(page, name))


@pytest.mark.parametrize(
    ("path", "rows", "count"),
    [
        ("/roots?limit=50", "tr[data-testid=root-row]", 50),
        (
            "/roots?limit=50&status=failed&status=replayed&status=completed",
            "tr[data-testid=root-row]",
            50,
        ),
        ("/dead-letters?limit=50", "tr[data-testid=dead-letter-row]", 50),
        ("/quality", "tr[data-testid=quality-row]", 69),
    ],
    ids=["roots", "roots-mixed", "dead-letters", "quality"],
)
def test_every_row_shows_and_nothing_is_cut(
    at_width: tuple[Any, int], ui: str, shoot: Any, path: str, rows: str, count: int
) -> None:
    page, width = at_width
    name = path.strip("/").split("?")[0]
    open_page(page, f"{ui}{path}", shoot, f"{name}-{width}")
    assert page.locator(rows).count() == count
    # The last row is on the page, below the one before it, in no scroll box.
    last = page.locator(rows).nth(count - 1).bounding_box()
    before = page.locator(rows).nth(count - 2).bounding_box()
    assert last is not None
    assert before is not None
    assert last["y"] > before["y"]
    assert page.evaluate(OVERFLOWS) == []


def test_the_dead_letters_reasons_and_redrive_links_read_whole(
    at_width: tuple[Any, int], ui: str, shoot: Any
) -> None:
    page, width = at_width
    open_page(page, f"{ui}/dead-letters?limit=50", shoot, f"dead-letters-links-{width}")
    reason = page.locator("td.reason").first.bounding_box()
    assert reason is not None
    # A long reason reads in a column of its own width, not squeezed to a few words a line.
    assert reason["width"] >= 200, reason
    links = page.locator("a[data-testid=redrive-link]")
    assert links.count() > 0
    for link in links.all():
        assert link.is_visible()
    empty = open_page(page, f"{ui}/dead-letters?app=nope", shoot, f"dead-letters-empty-{width}")
    assert empty.exists()
    assert "0–0" not in page.inner_text("main")


def test_no_overview_card_sits_alone_on_a_row(
    at_width: tuple[Any, int], ui: str, shoot: Any
) -> None:
    page, width = at_width
    open_page(page, f"{ui}/overview", shoot, f"overview-{width}")
    for section in ("#overview-counts", "#overview-latency"):
        tops = page.locator(f"{section} .card").evaluate_all(
            "(cards) => cards.map((c) => Math.round(c.getBoundingClientRect().top))"
        )
        per_row: dict[int, int] = {}
        for top in tops:
            per_row[top] = per_row.get(top, 0) + 1
        assert min(per_row.values()) > 1, (section, per_row)
    assert page.evaluate(OVERFLOWS) == []
    series = page.locator("#chart-latency g.series")
    assert series.count() == 2


@pytest.fixture(scope="module")
def passing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """The UI over a ledger with one quality run, which passed every check."""
    warehouse = tmp_path_factory.mktemp("passing") / "warehouse"
    checks = passing_quality_run(warehouse)
    with serve_ui(ui_settings(warehouse), airflow_url="http://airflow.test") as url:
        yield url, checks


@pytest.mark.parametrize("width", WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def test_a_run_that_passed_every_check_fits_the_window(
    browser: Any, passing: tuple[str, int], shoot: Any, width: int
) -> None:
    """The real suites' names (`delivery.orders.overdue_roots`, `not_null.status_changed_at`)
    wrap in their columns, and no empty column of examples takes room."""
    url, checks = passing
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.add_cookies([{"name": "_token", "value": "jwt-ann", "url": url}])
    page = context.new_page()
    try:
        open_page(page, f"{url}/quality", shoot, f"quality-passing-{width}")
        assert page.locator("tr[data-testid=quality-row]").count() == checks
        assert page.locator("#quality-results th").all_inner_texts()[-1] == "observed"
        assert page.evaluate(OVERFLOWS) == []
    finally:
        context.close()
