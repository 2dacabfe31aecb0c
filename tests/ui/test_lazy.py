"""`LazyApp`: the plugin's app, built on its first request, once."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ackfold.ledger.schema.ids import format_id
from ackfold.ui.lazy import LazyApp
from tests.ledger_fixtures import Sample
from tests.ui.conftest import FakeAirflow, make_client, ui_settings


def counting(app: Any) -> tuple[LazyApp, list[int]]:
    calls: list[int] = []
    lock = threading.Lock()

    def factory() -> Any:
        with lock:
            calls.append(1)
        time.sleep(0.2)  # long enough for the other requests to arrive meanwhile
        return app

    return LazyApp(factory), calls


def test_the_app_is_built_on_the_first_request_once(sample: Sample, airflow: FakeAirflow) -> None:
    real = make_client(ui_settings(sample.warehouse), airflow).app
    lazy, calls = counting(real)
    assert not lazy.built
    assert calls == []
    parent = FastAPI()
    parent.mount("/ackfold", lazy)  # as Airflow's `init_plugins` mounts `fastapi_apps`
    with TestClient(parent, follow_redirects=False) as client:  # runs the parent's lifespan
        assert calls == []
        client.cookies.set("_token", "jwt-ann")
        with ThreadPoolExecutor(4) as pool:
            pages = list(pool.map(lambda _: client.get("/ackfold/roots"), range(4)))
        assert [p.status_code for p in pages] == [200] * 4
        dead = format_id(sample.dead)
        assert f'href="/ackfold/roots/{dead}"' in pages[0].text  # the mount's root path
        assert client.get("/ackfold/api/roots").status_code == 200
    assert calls == [1]
    assert lazy.built


def test_lifespan_is_acknowledged_without_building() -> None:
    lazy, calls = counting(FastAPI())
    with TestClient(lazy):  # sends lifespan startup and shutdown to the app itself
        pass
    assert calls == []


def test_a_failing_build_is_503_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    real = FastAPI()

    @real.get("/ping")
    def ping() -> dict[str, bool]:
        return {"ok": True}

    attempts: list[int] = []

    def factory() -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("bad settings")
        return real

    client = TestClient(LazyApp(factory))
    broken = client.get("/ping")
    assert broken.status_code == 503
    assert "bad settings" not in broken.text  # details go to the log, not to anyone asking
    assert "bad settings" in caplog.text
    assert client.get("/ping").json() == {"ok": True}
    assert client.get("/ping").status_code == 200
    assert len(attempts) == 2
