"""The UI's FastAPI app over real Delta ledgers (`tests.ledger_fixtures`), no Airflow.

`viewer` stands in for Airflow's login: it accepts the JWTs in `TOKENS` from a Bearer
header or the `_token` cookie, and refuses the rest with 401 as Airflow's `get_user`
does. Airflow's REST API is an `httpx.MockTransport` that records the runs it creates.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, HTTPException, Request
from fastapi.testclient import TestClient

from ackfold.config import Settings, load_settings
from ackfold.ledger.tables import ROOT_STATE
from ackfold.ui.app import create_app
from ackfold.ui.security import Viewer, request_token
from tests.ledger_fixtures import Sample, sample_ledger, write_rows

HOST = "testserver"
TOKENS = {"jwt-ann": ("1", "ann"), "jwt-bob": ("2", "bob")}
SECRET = b"test-secret"


async def viewer(request: Request) -> Viewer:
    token, bearer = request_token(request)
    if token not in TOKENS:
        raise HTTPException(401, "Not authenticated")
    user_id, name = TOKENS[token]
    return Viewer(id=user_id, name=name, token=token, bearer=bearer)


@dataclass
class FakeAirflow:
    """Airflow's REST API for the trigger: records each request, answers like Airflow."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    answer: int = 200

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(
            {
                "url": str(request.url),
                "auth": request.headers.get("authorization"),
                "body": json.loads(request.content),
            }
        )
        if self.answer != 200:
            return httpx.Response(self.answer, json={"detail": "Forbidden"})
        return httpx.Response(
            200, json={"dag_run_id": f"manual__run{len(self.calls)}", "state": "queued"}
        )


@pytest.fixture(scope="session")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return sample_ledger(tmp_path_factory.mktemp("ui") / "warehouse")


def ui_settings(warehouse: str | Path, **ui: Any) -> Settings:
    return load_settings(
        var_dir=Path(warehouse).parent / "var",
        warehouse=str(warehouse),
        apps={"orders": {}, "clicks": {}},
        ui=ui,
    )


@pytest.fixture
def airflow() -> FakeAirflow:
    return FakeAirflow()


def make_client(
    settings: Settings, airflow: FakeAirflow, token: str | None = "jwt-ann", prefix: str = ""
) -> TestClient:
    """A client of the app; with `prefix`, of a parent app that mounts it there as the
    api-server mounts a plugin's app."""
    app: Any = create_app(
        settings,
        viewer=viewer,
        csrf_secret=SECRET,
        airflow_url="http://airflow.test",
        transport=httpx.MockTransport(airflow.handle),
    )
    if prefix:
        parent = FastAPI()
        parent.mount(prefix, app)
        app = parent
    client = TestClient(app, base_url=f"http://{HOST}", follow_redirects=False)
    if token is not None:
        client.cookies.set("_token", token)
    return client


@pytest.fixture
def client(sample: Sample, airflow: FakeAirflow) -> Iterator[TestClient]:
    with make_client(ui_settings(sample.warehouse, payload_preview_chars=120), airflow) as c:
        yield c


@pytest.fixture(scope="session")
def empty_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ui-empty") / "warehouse"
    write_rows(path, ROOT_STATE, [])
    return path
