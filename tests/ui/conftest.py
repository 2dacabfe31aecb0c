"""The UI's FastAPI app over real Delta ledgers (`tests.ledger_fixtures`), no Airflow.

`viewer` stands in for Airflow's login: it accepts the JWTs in `TOKENS` from a Bearer
header or the `_token` cookie, and refuses the rest with 401 as Airflow's `get_user`
does; `vic` has a role that may read but not trigger DAG runs. Airflow's REST API is an
`httpx.MockTransport` that records the runs it creates, or, where the network matters, a
real HTTP listener on loopback (`Listener`).
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, HTTPException, Request
from fastapi.testclient import TestClient

from ackfold.config import Settings, load_settings
from ackfold.ledger.schema.tables import ROOT_STATE
from ackfold.ui.app import create_app
from ackfold.ui.security import Viewer, request_token
from tests.ledger_fixtures import Sample, sample_ledger, write_rows

HOST = "testserver"
TOKENS = {"jwt-ann": ("1", "ann"), "jwt-bob": ("2", "bob"), "jwt-vic": ("3", "vic")}
READ_ONLY = {"vic"}  # an Airflow Viewer: may read, may not trigger a DAG run
SECRET = b"test-secret"
# What a browser sends with a form it posts to the page's own origin.
SAME_ORIGIN = {"Origin": f"http://{HOST}"}


async def viewer(request: Request) -> Viewer:
    token, bearer = request_token(request)
    if token not in TOKENS:
        raise HTTPException(401, "Not authenticated")
    user_id, name = TOKENS[token]
    may = name not in READ_ONLY
    return Viewer(
        id=user_id, name=name, token=token, bearer=bearer, can_replay=may, can_retract=may
    )


class Listener:
    """A real HTTP server on 127.0.0.1 that records every request it gets and answers
    each POST as Airflow answers a new DAG run: a stand-in for Airflow's API, or a host
    nothing must reach."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []  # the POSTs: the runs it was asked for
        self.reads: list[str] = []  # the GETs' paths (the trigger asks whether it is paused)
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                listener.reads.append(self.path)
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                listener.requests.append(
                    {
                        "path": self.path,
                        "auth": self.headers.get("Authorization"),
                        "body": json.loads(self.rfile.read(length) or b"null"),
                    }
                )
                answer = json.dumps({"dag_run_id": "manual__real", "state": "queued"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_PUT = do_DELETE = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.netloc = self.url.removeprefix("http://")
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Listener:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class FakeAirflow:
    """Airflow's REST API for the trigger of any manual DAG (the replay, the retract):
    records each request, answers like Airflow."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    answer: int = 200
    detail: str = "Forbidden"
    # GET: each run's state as Airflow reports it now, and its task's return value.
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    gets: list[dict[str, Any]] = field(default_factory=list)
    # Every DAG's pause flag (`GET /api/v2/dags/<dag id>`).
    paused: bool = False
    # Each run's DAG, and the task each DAG's summary is read from.
    dag_of: dict[str, str] = field(default_factory=dict)
    tasks: dict[str, str] = field(
        default_factory=lambda: {
            "ackfold_manual_replay": "replay",
            "ackfold_manual_retract": "retract",
        }
    )

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return self.get(request)
        self.calls.append(
            {
                "url": str(request.url),
                "auth": request.headers.get("authorization"),
                "body": json.loads(request.content),
            }
        )
        if self.answer != 200:
            return httpx.Response(self.answer, json={"detail": self.detail})
        run_id = f"manual__run{len(self.calls)}"
        self.dag_of[run_id] = request.url.path.split("/")[4]
        self.runs[run_id] = {
            "dag_run_id": run_id,
            "state": "queued",
            "conf": self.calls[-1]["body"]["conf"],
        }
        return httpx.Response(200, json={"dag_run_id": run_id, "state": "queued"})

    def get(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.gets.append({"path": path, "auth": request.headers.get("authorization")})
        parts = path.split("/")  # "", "api", "v2", "dags", <dag id>, "dagRuns", <run id>, ...
        dag_id = parts[4] if len(parts) > 4 and parts[3] == "dags" else ""
        if dag_id in self.tasks and len(parts) == 5:
            return httpx.Response(200, json={"dag_id": dag_id, "is_paused": self.paused})
        prefix = f"/api/v2/dags/{dag_id}/dagRuns/"
        run_id, _, rest = path.removeprefix(prefix).partition("/")
        if (
            not dag_id
            or not path.startswith(prefix)
            or run_id not in self.runs
            or self.dag_of[run_id] != dag_id
        ):
            return httpx.Response(404, json={"detail": "not found"})
        if rest == f"taskInstances/{self.tasks[dag_id]}/xcomEntries/return_value":
            if run_id not in self.summaries:
                return httpx.Response(404, json={"detail": "no XCom"})
            # Airflow's native XCom answer: the value as its JSON text.
            return httpx.Response(200, json={"value": json.dumps(self.summaries[run_id])})
        return httpx.Response(200, json=self.runs[run_id])


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
    settings: Settings,
    airflow: FakeAirflow | None,
    token: str | None = "jwt-ann",
    prefix: str = "",
    **options: Any,
) -> TestClient:
    """A client of the app; with `prefix`, of a parent app that mounts it there as the
    api-server mounts a plugin's app. Without `airflow`, the app calls Airflow over the
    network, where `options` (`create_app`'s keywords) say."""
    if airflow is not None:
        options.setdefault("airflow_url", "http://airflow.test")
        options["transport"] = httpx.MockTransport(airflow.handle)
    app: Any = create_app(settings, viewer=viewer, csrf_secret=SECRET, **options)
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


def csrf(client: TestClient, path: str = "/roots") -> str:
    """The CSRF token of the form on the page at `path`, as the viewer's browser sees it."""
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert match is not None
    return match.group(1)


def text_of(html: str) -> str:
    """A page's text: its tags dropped, its white space one space."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
