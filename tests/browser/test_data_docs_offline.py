"""Data Docs on a machine without internet: a real GX site (validated with pandas, no JVM),
published as a quality run publishes it, served by the Reliability UI on loopback, and
opened in Chromium with every request off this server refused. The styles apply, the
icons' font loads, and nothing asks a CDN.

The UI runs with the UI tier's stand-in login (`tests.ui.conftest.viewer`): Airflow's
own login is the stack's browser test's business."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ackfold.quality import docs_assets
from ackfold.quality.validator import make_offline, publish_site, site_dir
from ackfold_dev.ports import free_port
from tests.conftest import PROJECT_DIR
from tests.ui.conftest import SECRET, viewer

ASSETS = PROJECT_DIR / "var" / "quality" / "assets"


def build_site(site: Path) -> None:
    """GX's Data Docs of one validation that fails (a duplicate id, a null), as GX builds
    them for a quality run."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    import pandas as pd

    context = gx.get_context(mode="ephemeral")
    context.add_data_docs_site(
        site_name="ackfold",
        site_config={
            "class_name": "SiteBuilder",
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(site),
            },
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        },
    )
    batch = (
        context.data_sources.add_pandas("ledger")
        .add_dataframe_asset("ack_events")
        .add_batch_definition_whole_dataframe("ack_events")
    )
    suite = context.suites.add(
        gx.ExpectationSuite(
            name="ledger.ack_events",
            expectations=[
                gx.expectations.ExpectColumnValuesToBeUnique(
                    column="event_id", description="event_id identifies one event"
                ),
                gx.expectations.ExpectColumnValuesToNotBeNull(column="root_id"),
            ],
        )
    )
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name="ledger.ack_events", data=batch, suite=suite)
    )
    frame = pd.DataFrame({"event_id": ["a", "b", "b"], "root_id": [1, 2, None]})
    definition.run(batch_parameters={"dataframe": frame})
    context.build_data_docs(site_names=["ackfold"])


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
    site = site_dir(docs, "run1")
    build_site(site)
    assert make_offline(site, ASSETS) >= 3
    publish_site(docs, site)
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
    try:
        index = page.goto(f"{ui}/quality/docs/index.html", wait_until="load")
        assert index is not None
        assert index.status == 200
        assert "sandbox" in index.headers["content-security-policy"]
        # Bootstrap's rules apply: its font stack, its table and its navbar.
        assert "apple-system" in page.evaluate("getComputedStyle(document.body).fontFamily")
        assert page.evaluate("getComputedStyle(document.querySelector('.table')).borderCollapse")
        assert page.evaluate("document.querySelector('.navbar img').naturalWidth") > 0
        shoot(page, "index")

        # bootstrap-table (jQuery) renders the runs; a click on one opens its result.
        page.click("tr[data-href*='validations/']")
        page.wait_for_url("**/validations/**", wait_until="load")
        assert "event_id identifies one event" in page.content()
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
