"""The browser tier: Debian's Chromium, headless, driven by Playwright, against the shared
`make run` stack (`tests.conftest.stack`). Screenshots go to test-artifacts/browser/."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT_DIR

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = PROJECT_DIR / "test-artifacts" / "browser"
# Without the background-networking flags Chromium keeps calling Google's hosts, which
# this machine's closed network refuses; --no-sandbox because CI runs as root.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"no Chromium at {CHROMIUM}: run `make browser` (Debian's chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    # Airflow answers slowly while every other tier runs beside it on 2 cores.
    context.set_default_timeout(90_000)
    yield context.new_page()
    context.close()


@pytest.fixture
def shoot(request: pytest.FixtureRequest) -> Any:
    """`shoot(page, "name")` saves a full-page screenshot as a test artifact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def save(page: Any, name: str) -> Path:
        path = ARTIFACTS / f"{request.node.name}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
