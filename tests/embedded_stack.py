"""`make run`, started by a test exactly as a user types it, and a small client for it.

One stack serves the whole session (tests/airflow/test_standalone.py and tests/browser):
booting Airflow and the demo costs minutes. Its demo is small and has one of each kind of
trouble, so the UI has failed, replayed and dead-lettered roots to show:
a failed split (5%), one poison message and one stuck message (dead-lettered by an
outage; a replay by hand completes it). Besides the admin, it has a Viewer and a User
account (`USERS`, through the `airflow.users` setting). Its alerts go to a webhook the
test process receives (`Stack.alerts`), through an Airflow connection in the environment.
"""

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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ackfold_dev.stack import wait_healthy
from tests.alert_fixtures import Receiver
from tests.conftest import JARS_DIR, PROJECT_DIR

DEMO_MESSAGES = 100
DEMO_FAULTS: dict[str, Any] = {"seed": 1, "fail": {"split": 0.05}, "poison": 1, "stuck": 1}
# Three attempts, not the demo's five: two reconcile-and-replay cycles fewer to wait for,
# on a machine that also runs Airflow's reconcile, replay and quality jobs.
DEMO_MAX_ATTEMPTS = 3
# How long the stack may take to answer its health check: about a minute here, over 5 on
# CI's slower machine, where it starts beside every other tier's JVMs. Under the tests'
# default timeout (900 s), which covers the first stack test's setup.
START_WAIT = 720
# How long a test waits for the demo's report, from the stack's start. On 2 cores shared
# with every other tier the 100-message demo took 10 to 16 minutes; alone, about 5.
DEMO_WAIT = 1800
RECONCILE_SCHEDULE = "0 */6 * * *"
# A request to the stack's API: on 2 cores shared with every other tier, Airflow's API
# server has taken over 30 s to answer a GET. A GET that times out is asked again, until
# REQUEST_WAIT has passed since the first try.
REQUEST_TIMEOUT = 60
REQUEST_WAIT = 300
# Accounts besides the admin (`airflow.users`): one that reads, one that may replay.
USERS = {"vic": "viewer", "uma": "user"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Stack:
    url: str
    var: Path
    sqs: str
    make: subprocess.Popen[bytes]
    log: Path
    # The webhook the stack's alerts go to; None for a deployment started without one.
    alerts: Receiver | None = None

    @property
    def password(self) -> str:
        return self.password_of("admin")

    def password_of(self, user: str) -> str:
        return str(json.loads((self.var / "airflow" / "passwords.json").read_text())[user])

    def token(self, user: str = "admin") -> str:
        status, body = self.call(
            "POST", "/auth/token", {"username": user, "password": self.password_of(user)}
        )
        assert status in (200, 201), f"no token: {status} {body}"
        return str(body["access_token"])

    def page(self, path: str, token: str) -> tuple[int, str]:
        """GET `path` with a Bearer token: (status, text), whatever the content type."""
        request = urllib.request.Request(
            f"{self.url}{path}", headers={"Authorization": f"Bearer {token}"}
        )
        try:
            with _open(request) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """One JSON request to the stack: (status, parsed body or {})."""
        headers = {"Content-Type": "application/json", **(headers or {})}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}{path}", data=data, headers=headers, method=method
        )
        try:
            with _open(request) as response:
                text = response.read()
                return response.status, json.loads(text) if text else {}
        except urllib.error.HTTPError as error:
            text = error.read()
            try:
                return error.code, json.loads(text) if text else {}
            except ValueError:
                return error.code, {"text": text.decode(errors="replace")}

    def wait_for_log(self, text: str, timeout: float) -> str:
        """The `make run` output once it contains `text` (fails if make stops first)."""
        printed = ""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            printed = self.log.read_text()
            if text in printed:
                return printed
            assert self.make.poll() is None, f"make run stopped:\n{printed[-3000:]}"
            time.sleep(2)
        raise AssertionError(f"no {text!r} within {timeout:g}s:\n{printed[-3000:]}")

    def wait_for_run(self, dag_id: str, run_id: str, token: str, timeout: float) -> dict[str, Any]:
        """The DAG run once it has finished; fails on timeout."""
        deadline = time.monotonic() + timeout
        run: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status, run = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}", token=token)
            assert status == 200, run
            if run["state"] in ("success", "failed"):
                return run
            time.sleep(3)
        raise AssertionError(f"{dag_id} run {run_id} still {run.get('state')} after {timeout:g}s")

    def run_dag(self, dag_id: str, token: str, timeout: float) -> dict[str, Any]:
        """Trigger `dag_id` by hand, as the UI's Trigger button does, and wait for its run
        to finish."""
        for _ in range(3):
            status, run = self.call(
                "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None}, token=token
            )
            # Airflow standalone's SQLite may be locked by the scheduler's own commit (a 500,
            # "Database error"); a user's second click goes through.
            if status != 500 or "Database error" not in str(run):
                break
            time.sleep(3)
        assert status == 200, run
        return self.wait_for_run(dag_id, run["dag_run_id"], token, timeout)

    def wait_for_app(self, app: str, token: str, timeout: float) -> None:
        """Until `app`'s heartbeat says it is alive (its queries run): a driver started
        beside every other tier takes minutes to make its session and start them."""
        deadline = time.monotonic() + timeout
        state: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status, state = self.call("GET", f"/ackfold/api/apps/{app}", token=token)
            assert status == 200, state
            if state["state"] == "alive":
                return
            time.sleep(5)
        raise AssertionError(f"{app} is not alive after {timeout:g}s: {state.get('why')}")

    def reconcile(self, token: str, timeout: float) -> None:
        """Run `ackfold_reconcile` by hand (its alerts with it) and wait for its success:
        beside a continuous app, the reconcile keeps its own schedule, and the stack's is
        every 6 hours (`RECONCILE_SCHEDULE`)."""
        run = self.run_dag("ackfold_reconcile", token, timeout)
        assert run["state"] == "success", run

    def stop(self) -> None:
        if self.make.poll() is None:
            os.killpg(self.make.pid, signal.SIGINT)
            self.make.wait(timeout=120)


def _open(request: urllib.request.Request) -> Any:
    """`urlopen`, asked again while a GET times out (`REQUEST_WAIT`); a POST once, since
    asking again could trigger a second run."""
    deadline = time.monotonic() + REQUEST_WAIT
    while True:
        try:
            return urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT)
        except (TimeoutError, urllib.error.URLError) as error:
            # A connect that times out comes wrapped in a URLError, a read that does not.
            timed_out = isinstance(getattr(error, "reason", error), TimeoutError)
            if not timed_out or request.get_method() != "GET" or time.monotonic() > deadline:
                raise


@contextmanager
def embedded_stack(var: Path) -> Iterator[Stack]:
    """`make run` in its own session (so a test can Ctrl-C it like a terminal), on free
    ports, with its state under `var`; stopped on exit."""
    port = free_port()
    sqs = f"http://127.0.0.1:{free_port()}"
    alerts = Receiver()
    hook = {"conn_type": "http", "password": f"{alerts.url}/hooks/stack"}
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ACKFOLD_"))},
        "ACKFOLD_VAR_DIR": str(var),
        "ACKFOLD_JARS_DIR": str(JARS_DIR),
        # Data Docs' styles and scripts, as `make setup` fetched them (not again per stack).
        "ACKFOLD_QUALITY__ASSETS_DIR": str(PROJECT_DIR / "var" / "quality" / "assets"),
        "ACKFOLD_AIRFLOW__PORT": str(port),
        "ACKFOLD_SQS__ENDPOINT_URL": sqs,
        "ACKFOLD_DEMO__MESSAGES": str(DEMO_MESSAGES),
        "ACKFOLD_DEMO__FAULTS": json.dumps(DEMO_FAULTS),
        "ACKFOLD_APPS__WORDCOUNT__MAX_ATTEMPTS": str(DEMO_MAX_ATTEMPTS),
        # Airflow runs a DAG's latest missed tick when it starts (catchup=False), so the
        # scheduled reconcile, and the replay and quality its asset triggers, still run at
        # once; after that the tests trigger what they need. Every 5 minutes, as a user's
        # stack does, kept three spark-submits running beside every other tier all run long.
        "ACKFOLD_AIRFLOW__RECONCILE_SCHEDULE": RECONCILE_SCHEDULE,
        "ACKFOLD_AIRFLOW__USERS": json.dumps(USERS),
        "ACKFOLD_ALERTS__WEBHOOK_CONN_ID": "ackfold_alerts",
        "AIRFLOW_CONN_ACKFOLD_ALERTS": json.dumps(hook),
    }
    log_path = var / "make-run.log"
    with alerts, log_path.open("wb") as log:
        make = subprocess.Popen(
            ["make", "-s", "run"], cwd=PROJECT_DIR, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        stack = Stack(f"http://localhost:{port}", var, sqs, make, log_path, alerts)
        try:
            wait_healthy(
                f"{stack.url}/api/v2/monitor/health", START_WAIT, lambda: make.poll() is None
            )
            yield stack
        finally:
            stack.stop()
