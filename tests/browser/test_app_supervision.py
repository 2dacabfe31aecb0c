"""An app of `make run`, watched in the Reliability UI: the word count runs continuously as
its Airflow DAG and its page shows it alive; its driver is killed, and the page shows it
stalled and the reconcile's alerts send one `stalled` message; Airflow restarts the
driver, the page shows it alive again, and the next reconcile resolves the alert."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ackfold.config import load_settings
from ackfold.demo.wordcount import with_demo_policy
from ackfold.ledger.commits.lock import app_lock
from tests.browser.test_reliability_ui import _log_in
from tests.embedded_stack import DEMO_WAIT, Stack

APP = "wordcount"
DAG = f"ackfold_app_{APP}"
# The driver takes a minute or more to start on a loaded machine, a reconcile as long.
START_WAIT = 900


def _state(page: Any, stack: Stack) -> str:
    page.goto(f"{stack.url}/ackfold/apps/{APP}")
    return str(page.get_attribute("#app-state", "data-state"))


def _wait_for(page: Any, stack: Stack, state: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (now := _state(page, stack)) != state:
        assert time.monotonic() < deadline, f"{APP} is {now}, not {state}: " + page.inner_text(
            "#app-why"
        )
        time.sleep(5)


def _driver(stack: Stack) -> int:
    """The Python process of the DAG's running driver: `wordcount_app.py --continuous`."""
    marker = f"ACKFOLD_VAR_DIR={stack.var}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        script = any(arg.endswith(b"wordcount_app.py") for arg in argv)
        if script and argv[0].endswith(b"python") and argv[-2:] == [b"--continuous", b""]:
            found.append(int(entry.name))
    assert len(found) == 1, f"one driver of {DAG}, not {found}"
    return found[0]


def _stall_alerts(stack: Stack) -> list[str]:
    """The `stalled` lines of the app's alert messages, opened and resolved, in order."""
    return [
        line
        for text in stack.alerts.texts()
        for line in text.splitlines()
        if line.startswith(("OPENED stalled: ", "RESOLVED stalled: ")) and f" {APP} is " in line
    ]


def _tries(stack: Stack, token: str) -> int:
    status, runs = stack.call("GET", f"/api/v2/dags/{DAG}/dagRuns", token=token)
    assert status == 200, runs
    (run,) = [r for r in runs["dag_runs"] if r["state"] == "running"]
    path = f"/api/v2/dags/{DAG}/dagRuns/{run['dag_run_id']}/taskInstances/run"
    status, task = stack.call("GET", path, token=token)
    assert status == 200, task
    return int(task["try_number"])


@pytest.mark.timeout(DEMO_WAIT + 4 * START_WAIT)
def test_an_app_goes_alive_then_stalled_with_one_alert_then_alive_again(
    stack: Stack, page: Any, shoot: Any
) -> None:
    stack.wait_for_log("the app keeps running as the Airflow DAG", DEMO_WAIT)
    _log_in(page, stack, f"/ackfold/apps/{APP}")
    _wait_for(page, stack, "alive", START_WAIT)
    shoot(page, "9-app-alive")
    token = stack.token()
    tries = _tries(stack, token)
    before = _stall_alerts(stack)
    assert not before or before[-1].startswith("RESOLVED"), f"a stall is open already: {before}"
    # The demo's policy, as `make run` registers it for the stack's processes.
    settings = with_demo_policy(load_settings(var_dir=stack.var))
    stall_after = settings.app(APP).alerts.max_heartbeat_age
    assert stall_after is not None
    assert not isinstance(stall_after, str)

    os.kill(_driver(stack), signal.SIGKILL)
    # The test holds the app while it watches the stall, as `ackfold demo` does for its
    # report: Airflow restarts the driver after its backoff, and the new one waits for the
    # app's lock, so the stall lasts as long as this machine's load makes the watch take.
    held = "tests/browser: the stall is watched"
    with app_lock(stack.var, settings.table_root, APP, held, wait=120):
        _wait_for(page, stack, "stalled", stall_after.total_seconds() + START_WAIT)
        why = page.inner_text("#app-why")
        assert why.startswith(f"no heartbeat of query {APP}."), why
        shoot(page, "10-app-stalled")
        stack.reconcile(token, START_WAIT)
        opened = _stall_alerts(stack)[len(before) :]
        assert len(opened) == 1, opened
        assert opened[0].startswith(f"OPENED stalled: {APP} is stalled: no heartbeat"), opened
        # Supervised: Airflow has tried the driver again; it waits for the app.
        deadline = time.monotonic() + START_WAIT
        while _tries(stack, token) == tries:
            assert time.monotonic() < deadline, f"{DAG} was not restarted"
            time.sleep(5)

    _wait_for(page, stack, "alive", START_WAIT)
    shoot(page, "11-app-alive-again")
    stack.reconcile(token, START_WAIT)
    after = _stall_alerts(stack)[len(before) :]
    assert len(after) == 2, after
    assert after[1].startswith(f"RESOLVED stalled: {APP} is alive"), after
