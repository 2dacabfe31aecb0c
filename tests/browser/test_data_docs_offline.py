"""Data Docs on a machine without internet: a real GX site (validated with pandas, no JVM),
built and published as a quality run does (`ackfold.quality.validator`), served by the
Reliability UI on loopback, and opened in Chromium with every request off this server
refused. The styles apply, the icons' font loads, nothing asks a CDN, no script fails,
and each page loads the site's shared files by its signed links.

The UI runs with the UI tier's stand-in login (`tests.ui.conftest.viewer`): Airflow's
own login is the stack's browser test's business."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ackfold.quality import docs_assets
from ackfold.quality.expectations import Suite, expect
from ackfold.quality.validator import Validator
from ackfold_dev.ports import free_port
from tests.conftest import PROJECT_DIR
from tests.ui.conftest import SECRET, viewer

ASSETS = PROJECT_DIR / "var" / "quality" / "assets"
RUN = "20261129T020000Z-0ff1ce"


def build_site(docs: Path) -> None:
    """The Data Docs of one validation that fails (a duplicate id, a null), built and
    published as a quality run does."""
    import pandas as pd

    suite = Suite(
        name="ledger.ack_events",
        app=None,
        index=("event_id",),
        expectations=[
            expect("ExpectColumnValuesToBeUnique", "event_id_unique",
                   "event_id identifies one event", column="event_id"),
            expect("ExpectColumnValuesToNotBeNull", "not_null.root_id",
                   "ack_events.root_id is never null", column="root_id"),
        ],
    )  # fmt: skip
    validator = Validator(docs, RUN, frames="pandas", assets_dir=ASSETS)
    frame = pd.DataFrame({"event_id": ["a", "b", "b"], "root_id": [1, 2, None]})
    results = validator.validate(suite, frame)
    assert [r.success for r in results] == [False, False]
    validator.publish()


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The UI on a free loopback port, its Data Docs published as a quality run does."""
    import uvicorn

    from tests.ui.conftest import ui_settings

    try:
        docs_assets.load(ASSETS)
    except docs_assets.AssetsError as exc:
        pytest.fail(str(exc))
    from ackfold.ui.app import create_app

    var = tmp_path_factory.mktemp("docs")
    settings = ui_settings(var / "warehouse")
    docs = settings.quality.docs_dir
    assert docs is not None
    build_site(docs)
    app = create_app(settings, viewer=viewer, csrf_secret=SECRET)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "the UI did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


def test_data_docs_are_styled_with_the_network_blocked(ui: str, browser: Any, shoot: Any) -> None:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.add_cookies([{"name": "_token", "value": "jwt-ann", "url": ui}])
    refused: list[str] = []

    def only_this_server(route: Any) -> None:
        if route.request.url.startswith(ui):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    context.route("**/*", only_this_server)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
    served: list[tuple[str, int]] = []
    page.on("response", lambda r: served.append((r.url.removeprefix(ui), r.status)))
    try:
        index = page.goto(f"{ui}/quality/docs/index.html", wait_until="load")
        assert index is not None
        assert index.status == 200
        assert "sandbox" in index.headers["content-security-policy"]
        # The run's name, not GX's `__none__`.
        assert RUN in page.inner_text("body")
        assert "__none__" not in page.content()
        # The site's shared files, asked without the login cookie, by signed links.
        static = [(url, status) for url, status in served if "/_static/" in url]
        assert static, served
        assert all(status == 200 and "?t=" in url for url, status in static), static
        # Bootstrap's rules apply: its font stack, its table and its navbar.
        assert "apple-system" in page.evaluate("getComputedStyle(document.body).fontFamily")
        assert page.evaluate("getComputedStyle(document.querySelector('.table')).borderCollapse")
        assert page.evaluate("document.querySelector('.navbar img').naturalWidth") > 0
        shoot(page, "index")

        # bootstrap-table (jQuery) renders the runs; a click on one opens its result.
        page.click("tr[data-href*='validations/']")
        page.wait_for_url("**/validations/**", wait_until="load")
        assert "event_id identifies one event" in page.content()
        assert "Data asset: ledger.ack_events" in page.inner_text("body")
        styles = page.evaluate(
            """() => {
                const card = document.querySelector('.card');
                const icon = document.querySelector('.fas, .fa, .far');
                return {
                  card: card && getComputedStyle(card).borderRadius,
                  icon: icon && getComputedStyle(icon).fontFamily,
                  fonts: document.fonts.check('1em "Font Awesome 6 Free"'),
                  jquery: typeof window.jQuery,
                };
            }"""
        )
        assert styles["card"] not in (None, "0px"), styles
        assert styles["icon"] is not None, styles
        assert "Font Awesome" in styles["icon"], styles
        assert styles["jquery"] == "function", styles
        shoot(page, "validation")
    finally:
        context.close()
    assert refused == [], "Data Docs asked the network for what they should carry"
    assert errors == [], "a script of Data Docs failed"
