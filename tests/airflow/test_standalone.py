"""`make run` boots airflow standalone, its API wants a token, and Ctrl-C leaves no orphan."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ackfold.config import load_settings
from ackfold.sqs_client import sqs_client
from ackfold.stack import wait_healthy
from tests.conftest import JARS_DIR, PROJECT_DIR


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _processes_with(env_entry: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if env_entry in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _request(
    url: str, token: str | None = None, body: dict[str, str] | None = None
) -> tuple[int, dict]:  # type: ignore[type-arg]
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, {}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    var = tmp_path_factory.mktemp("stack-var")
    port = _free_port()
    sqs = f"http://127.0.0.1:{_free_port()}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ACKFOLD_"))},
        "ACKFOLD_VAR_DIR": str(var),
        "ACKFOLD_JARS_DIR": str(JARS_DIR),
        "ACKFOLD_AIRFLOW__PORT": str(port),
        "ACKFOLD_SQS__ENDPOINT_URL": sqs,
        # A small demo without faults: the faults have their own end-to-end test.
        "ACKFOLD_DEMO__MESSAGES": "100",
        "ACKFOLD_DEMO__FAULTS": '{"seed": 0}',
    }
    log = (var / "make-run.log").open("wb")
    # Exactly what a user types, in its own session so the test can Ctrl-C it like a terminal.
    make = subprocess.Popen(
        ["make", "-s", "run"], cwd=PROJECT_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://localhost:{port}"
    try:
        wait_healthy(f"{url}/api/v2/monitor/health", 300, lambda: make.poll() is None)
        yield {"url": url, "var": var, "make": make, "log": var / "make-run.log", "sqs": sqs}
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGINT)
            make.wait(timeout=120)
        log.close()


def test_api_answers_with_a_token_and_lists_the_dags(stack: dict[str, object]) -> None:
    var = Path(str(stack["var"]))
    password = json.loads((var / "airflow" / "passwords.json").read_text())["admin"]
    printed = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and password not in printed:
        printed = Path(str(stack["log"])).read_text()
        time.sleep(0.5)
    assert password in printed, "make run must print the admin password"
    assert str(stack["url"]) in printed, "make run must print the UI address"

    status, token = _request(
        f"{stack['url']}/auth/token", body={"username": "admin", "password": password}
    )
    assert status == 201 or status == 200
    deadline = time.monotonic() + 120
    dag_ids: list[str] = []
    while time.monotonic() < deadline and "ackfold_smoke" not in dag_ids:
        status, body = _request(f"{stack['url']}/api/v2/dags", token=token["access_token"])
        assert status == 200
        dag_ids = [dag["dag_id"] for dag in body["dags"]]
        time.sleep(2)
    assert "ackfold_smoke" in dag_ids


def test_ackfold_smoke_runs_to_success_on_its_own(stack: dict[str, object]) -> None:
    var = Path(str(stack["var"]))
    password = json.loads((var / "airflow" / "passwords.json").read_text())["admin"]
    _, token = _request(
        f"{stack['url']}/auth/token", body={"username": "admin", "password": password}
    )
    url = f"{stack['url']}/api/v2/dags/ackfold_smoke/dagRuns"
    states: list[str] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and "success" not in states:
        assert "failed" not in states, "ackfold_smoke failed: see var/airflow/standalone.log"
        status, body = _request(url, token=token["access_token"])
        states = [run["state"] for run in body.get("dag_runs", [])] if status == 200 else []
        time.sleep(3)
    assert "success" in states


def test_make_run_serves_sqs_with_the_demo_queues(stack: dict[str, object]) -> None:
    settings = load_settings(sqs={"endpoint_url": str(stack["sqs"])}, jars_dir=JARS_DIR)
    urls = sqs_client(settings).list_queues()["QueueUrls"]
    names = sorted(url.rsplit("/", 1)[-1] for url in urls)
    assert names == ["wordcount-sentences", "wordcount-sentences-dlq"]
    assert f"started ElasticMQ (SQS) on {stack['sqs']}" in Path(str(stack["log"])).read_text()


def test_make_run_shows_the_demo_report_then_keeps_the_app_running(
    stack: dict[str, object],
) -> None:
    log = Path(str(stack["log"]))
    make = stack["make"]
    assert isinstance(make, subprocess.Popen)
    text = ""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and "the app keeps running" not in text:
        assert make.poll() is None, "make run stopped"
        text = log.read_text()
        time.sleep(2)
    assert "the app keeps running" in text, f"no demo report within 10 minutes:\n{text[-3000:]}"
    report = text[text.index("Delivery report") :].splitlines()
    assert report[1].split()[:3] == ["messages", "sent", "100"], report
    assert any(line.split()[:2] == ["lost", "0"] for line in report), report
    assert any("completed on the first try" in line and "100" in line for line in report)
    assert "word counts: exact" in text
    status = json.loads((Path(str(stack["var"])) / "run" / "wordcount.json").read_text())
    assert status["phase"] in ("cycle 1", "running"), status
    assert status["roots_by_status"] == {"completed": 100}


def test_api_refuses_anonymous_requests_and_bad_passwords(stack: dict[str, object]) -> None:
    assert _request(f"{stack['url']}/api/v2/dags")[0] == 401
    assert (
        _request(f"{stack['url']}/auth/token", body={"username": "admin", "password": "nope"})[0]
        == 401
    )


def test_ctrl_c_stops_every_process_it_started(stack: dict[str, object]) -> None:
    marker = f"ACKFOLD_VAR_DIR={stack['var']}".encode()
    assert _processes_with(marker), "the stack should be running before Ctrl-C"
    make = stack["make"]
    assert isinstance(make, subprocess.Popen)
    os.killpg(make.pid, signal.SIGINT)
    make.wait(timeout=120)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _processes_with(marker):
        time.sleep(1)
    assert _processes_with(marker) == []
    assert "stopped: no ackfold process is left running." in Path(str(stack["log"])).read_text()
