"""`make run` boots airflow standalone with every ackfold DAG running on its own, the
demo's report, its API wants a token, and Ctrl-C leaves no orphan."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from ackfold.config import load_settings
from ackfold.sources.sqs_client import sqs_client
from tests.conftest import JARS_DIR
from tests.embedded_stack import DEMO_MESSAGES, Stack
from tests.spark_output import spark_warnings


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


ACKFOLD_DAGS = (
    "ackfold_maintenance",
    "ackfold_manual_replay",
    "ackfold_quality",
    "ackfold_reconcile",
    "ackfold_replay",
    "ackfold_smoke",
)


def test_make_run_prints_where_to_log_in_and_the_api_wants_a_token(stack: Stack) -> None:
    printed = stack.wait_for_log(stack.password, 30)
    assert stack.url in printed, "make run must print the UI address"
    assert stack.call("GET", "/api/v2/dags")[0] == 401
    bad = {"username": "admin", "password": "nope"}
    assert stack.call("POST", "/auth/token", bad)[0] == 401


def test_every_ackfold_dag_is_listed_and_unpaused_without_anyone_touching_it(
    stack: Stack,
) -> None:
    token = stack.token()
    deadline = time.monotonic() + 120
    dags: dict[str, bool] = {}
    while time.monotonic() < deadline and not set(ACKFOLD_DAGS) <= set(dags):
        status, body = stack.call("GET", "/api/v2/dags?tags=ackfold", token=token)
        assert status == 200, body
        dags = {dag["dag_id"]: dag["is_paused"] for dag in body["dags"]}
        time.sleep(2)
    assert sorted(dags) == sorted(ACKFOLD_DAGS)
    assert not any(dags.values()), f"paused: {[d for d, paused in dags.items() if paused]}"


def _runs(stack: Stack, dag_id: str, token: str) -> list[dict[str, object]]:
    status, body = stack.call("GET", f"/api/v2/dags/{dag_id}/dagRuns", token=token)
    return list(body.get("dag_runs", [])) if status == 200 else []


def _wait_for_success(stack: Stack, dag_id: str, timeout: float) -> dict[str, object]:
    token = stack.token()
    deadline = time.monotonic() + timeout
    runs: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        runs = _runs(stack, dag_id, token)
        assert "failed" not in [run["state"] for run in runs], (
            f"{dag_id} failed: see {stack.var}/airflow/standalone.log and its task logs"
        )
        done = [run for run in runs if run["state"] == "success"]
        if done:
            return done[0]
        time.sleep(3)
    raise AssertionError(f"no successful {dag_id} run within {timeout:g}s: {runs}")


def test_ackfold_smoke_runs_to_success_on_its_own(stack: Stack) -> None:
    _wait_for_success(stack, "ackfold_smoke", 300)


def test_make_run_serves_sqs_with_the_demo_queues(stack: Stack) -> None:
    settings = load_settings(sqs={"endpoint_url": stack.sqs}, jars_dir=JARS_DIR)
    urls = sqs_client(settings).list_queues()["QueueUrls"]
    names = sorted(url.rsplit("/", 1)[-1] for url in urls)
    assert names == ["wordcount-sentences", "wordcount-sentences-dlq"]
    assert f"started ElasticMQ (SQS) on {stack.sqs}" in stack.log.read_text()


def test_make_run_shows_the_demo_report_then_keeps_the_app_running(stack: Stack) -> None:
    text = stack.wait_for_log("the app keeps running", 600)
    report = text[text.index("Delivery report") :].splitlines()
    assert report[1].split()[:3] == ["messages", "sent", str(DEMO_MESSAGES)], report
    assert any(line.split()[:2] == ["lost", "0"] for line in report), report
    assert any("exactly the poison and stuck messages" in line for line in report), report
    assert "word counts: exact" in text
    assert "the Airflow DAGs ackfold_reconcile and ackfold_replay reconcile" in text
    # ackfold's lines and real errors only: none of Spark's warnings (`--verbose` shows them,
    # tests/spark/test_cli_on_spark_ledger.py).
    assert spark_warnings(text) == [], spark_warnings(text)[:10]
    status = json.loads((stack.var / "run" / "wordcount.json").read_text())
    assert status["phase"].startswith(("cycle", "running")), status
    # As of the demo's last reconcile: every message but the poison and the stuck one.
    assert status["roots_by_status"]["completed"] == DEMO_MESSAGES - 2, status


def test_the_reconcile_dag_runs_on_schedule_and_replay_and_quality_follow_its_asset(
    stack: Stack,
) -> None:
    reconciled = _wait_for_success(stack, "ackfold_reconcile", 420)
    assert reconciled["run_type"] == "scheduled"
    replayed = _wait_for_success(stack, "ackfold_replay", 300)
    assert replayed["run_type"] == "asset_triggered"
    # The quality checks run and pass: the ledger checks on the demo's ledger, and the
    # delivery checks over what is overdue (a violation fails the run).
    checked = _wait_for_success(stack, "ackfold_quality", 300)
    assert checked["run_type"] == "asset_triggered"


@pytest.mark.stops_stack
def test_ctrl_c_stops_every_process_it_started(stack: Stack) -> None:
    marker = f"ACKFOLD_VAR_DIR={stack.var}".encode()
    assert _processes_with(marker), "the stack should be running before Ctrl-C"
    os.killpg(stack.make.pid, signal.SIGINT)
    stack.make.wait(timeout=120)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _processes_with(marker):
        time.sleep(1)
    assert _processes_with(marker) == []
    assert "stopped: no ackfold process is left running." in stack.log.read_text()
