"""`make run` boots airflow standalone with every ackfold DAG running on its own, the
demo's report, its API wants a token, a Viewer reads the Reliability UI but cannot replay
and a User can, and Ctrl-C leaves no orphan."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ackfold.config import load_settings
from ackfold.replay.params import MANUAL_REPLAY_DAG_ID
from ackfold.sources.sqs_client import sqs_client
from ackfold_dev.airflow_env import airflow_parallelism
from tests.conftest import JARS_DIR
from tests.embedded_stack import DEMO_MESSAGES, DEMO_WAIT, USERS, Stack
from tests.spark_output import spark_warnings


def _executor_workers(stack: Stack) -> list[int]:
    """The LocalExecutor's workers of the stack: children of its scheduler, titled so
    (their title takes over the memory of their environment: no marker to read there)."""
    stack_processes = set(_processes_with(f"ACKFOLD_VAR_DIR={stack.var}".encode()))
    found = []
    for entry in Path("/proc").iterdir():
        try:
            title = (entry / "cmdline").read_bytes()
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone since, or no process
            continue
        if title.startswith(b"airflow worker -- LocalExecutor") and parent in stack_processes:
            found.append(int(entry.name))
    return found


def _zombies_of(stack: Stack) -> list[str]:
    """The `<defunct>` children of the stack's `ackfold up` process."""
    marker = f"ACKFOLD_VAR_DIR={stack.var}".encode()
    up = []
    for pid in _processes_with(marker):  # `.venv/bin/ackfold up`, as make runs it
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if len(argv) > 2 and argv[1].endswith(b"/ackfold") and argv[2] == b"up":
            up.append(pid)
    assert len(up) == 1, up
    zombies = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and int(fields[1]) == up[0]:
            zombies.append((entry / "stat").read_text().split(")")[0])
    return zombies


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
    "ackfold_app_wordcount",
    "ackfold_maintenance",
    "ackfold_manual_replay",
    "ackfold_manual_retract",
    "ackfold_quality",
    "ackfold_reconcile",
    "ackfold_replay",
    "ackfold_smoke",
)
# The stack's accounts besides the admin (`tests.embedded_stack.USERS`).
VIEWER, USER = "vic", "uma"
REFUSED = f"{VIEWER} may read these pages, but replaying needs an Airflow role that may trigger"


def test_make_run_prints_where_to_log_in_and_the_api_wants_a_token(stack: Stack) -> None:
    printed = stack.wait_for_log(stack.password, 30)
    assert stack.url in printed, "make run must print the UI address"
    # The other accounts (`airflow.users`), each with its role and password.
    assert f"also         {VIEWER} (viewer), password {stack.password_of(VIEWER)}" in printed
    assert f"             {USER} (user), password {stack.password_of(USER)}" in printed
    assert stack.call("GET", "/api/v2/dags")[0] == 401
    bad = {"username": "admin", "password": "nope"}
    assert stack.call("POST", "/auth/token", bad)[0] == 401
    # A token that is no token: 401 too (docs/ui.md), for Airflow's API and the UI's.
    assert stack.call("GET", "/ackfold/api/roots", token="not-a-jwt")[0] == 401
    # Its secrets are its owner's: the metadata database (connections, variables) too.
    for private in ("airflow.db", "airflow.cfg", "passwords.json"):
        mode = (stack.var / "airflow" / private).stat().st_mode
        assert stat.S_IMODE(mode) == 0o600, (private, oct(mode))
    # The LocalExecutor forks as many workers as the stack's parallelism (once the
    # scheduler is up): sized to the cores, not Airflow's 32.
    deadline = time.monotonic() + 300
    while not (workers := _executor_workers(stack)):
        assert time.monotonic() < deadline, "no LocalExecutor worker: is the scheduler up?"
        time.sleep(2)
    assert len(workers) <= airflow_parallelism(os.cpu_count()), workers


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


# How long a DAG the stack's scheduler starts by itself may take to succeed: at the stack's
# start its Spark jobs (smoke, reconcile, replay, quality) and the demo share the machine
# with the other tiers' JVMs.
JOB_WAIT = 900


def _runs(stack: Stack, dag_id: str, token: str) -> list[dict[str, object]]:
    status, body = stack.call("GET", f"/api/v2/dags/{dag_id}/dagRuns", token=token)
    return list(body.get("dag_runs", [])) if status == 200 else []


def _wait_for_success(
    stack: Stack, dag_id: str, timeout: float, run_type: str | None = None
) -> dict[str, object]:
    """A successful run of `dag_id` (of `run_type`, if given); fails if a run failed."""
    token = stack.token()
    deadline = time.monotonic() + timeout
    runs: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        runs = _runs(stack, dag_id, token)
        assert "failed" not in [run["state"] for run in runs], (
            f"{dag_id} failed: see {stack.var}/airflow/standalone.log and its task logs"
        )
        done = [
            run for run in runs
            if run["state"] == "success" and run_type in (None, run["run_type"])
        ]  # fmt: skip
        if done:
            return done[0]
        time.sleep(3)
    raise AssertionError(f"no successful {dag_id} run within {timeout:g}s: {runs}")


@pytest.mark.timeout(JOB_WAIT + 60)
def test_ackfold_smoke_runs_to_success_on_its_own(stack: Stack) -> None:
    _wait_for_success(stack, "ackfold_smoke", JOB_WAIT)


def test_make_run_serves_sqs_with_the_demo_queues(stack: Stack) -> None:
    settings = load_settings(sqs={"endpoint_url": stack.sqs}, jars_dir=JARS_DIR)
    urls = sqs_client(settings).list_queues()["QueueUrls"]
    names = sorted(url.rsplit("/", 1)[-1] for url in urls)
    assert names == ["wordcount-sentences", "wordcount-sentences-dlq"]
    assert f"started ElasticMQ (SQS) on {stack.sqs}" in stack.log.read_text()


@pytest.mark.timeout(DEMO_WAIT + 300)
def test_make_run_shows_the_demo_report_then_keeps_the_app_running(stack: Stack) -> None:
    text = stack.wait_for_log("the app keeps running", DEMO_WAIT)
    report = text[text.index("Delivery report") :].splitlines()
    assert report[1].split()[:3] == ["messages", "sent", str(DEMO_MESSAGES)], report
    assert any(line.split()[:2] == ["lost", "0"] for line in report), report
    assert any("exactly the poison and stuck messages" in line for line in report), report
    assert "word counts: exact" in text
    assert "the app keeps running as the Airflow DAG ackfold_app_wordcount (continuous" in text
    # ackfold's lines and real errors only: none of Spark's warnings (`--verbose` shows them,
    # tests/spark/test_cli_on_spark_ledger.py).
    assert spark_warnings(text) == [], spark_warnings(text)[:10]
    status = json.loads((stack.var / "run" / "wordcount.json").read_text())
    # The demo's hand-over, or the DAG's driver once it has taken the app over.
    assert status["phase"].startswith("running as ackfold_app_wordcount"), status
    # The demo is done: reaped, not left `<defunct>` beside the stack until Ctrl-C. It
    # says so a moment before it exits, and the stack reaps it on its next check (each
    # second): a zombie older than that is one left until Ctrl-C.
    deadline = time.monotonic() + 60
    while _zombies_of(stack) and time.monotonic() < deadline:
        time.sleep(1)
    assert _zombies_of(stack) == []
    # As of the demo's last reconcile: every message but the poison and the stuck one.
    assert status["roots_by_status"]["completed"] == DEMO_MESSAGES - 2, status


@pytest.mark.timeout(DEMO_WAIT + 3 * JOB_WAIT)
def test_the_word_count_runs_continuously_as_its_dag_and_the_reconcile_folds_it(
    stack: Stack,
) -> None:
    stack.wait_for_log("the app keeps running as the Airflow DAG", DEMO_WAIT)
    token = stack.token()
    # One run of the DAG, running: the app takes messages as they come, once its driver
    # has taken over from the demo and started its queries.
    runs = _runs(stack, "ackfold_app_wordcount", token)
    assert [run["state"] for run in runs] == ["running"], runs
    stack.wait_for_app("wordcount", token, JOB_WAIT)
    sent_at = datetime.now(UTC)
    settings = load_settings(sqs={"endpoint_url": stack.sqs}, jars_dir=JARS_DIR)
    client = sqs_client(settings)
    url = client.get_queue_url(QueueName="wordcount-sentences")["QueueUrl"]
    body = json.dumps({"seq": 1_000_000, "text": "the loop runs through airflow"})
    message_id = client.send_message(QueueUrl=url, MessageBody=body)["MessageId"]
    since = sent_at.strftime("%Y-%m-%dT%H:%M:%SZ")

    def completed_sources() -> list[str]:
        # Completed, or completed late: on a machine this loaded, its tree can take longer
        # than the demo's 10 s timeout, and be replayed before it completes.
        done = "status=completed&status=completed_late"
        status, found = stack.call("GET", f"/ackfold/api/roots?{done}&since={since}", token=token)
        assert status == 200, found
        sources = []
        for root in found["roots"]:
            path = f"/ackfold/api/roots/{root['root_id']}"
            status, journey = stack.call("GET", path, token=token)
            assert status == 200, journey
            sources.append(journey["source"]["source_message_id"])
        return sources

    # The reconcile keeps its own schedule beside a continuous app: run it by hand until
    # it has folded the message's tree (the app takes it within seconds, more on a
    # loaded machine).
    deadline = time.monotonic() + JOB_WAIT
    stack.reconcile(token, JOB_WAIT)
    while message_id not in completed_sources():
        assert time.monotonic() < deadline, f"{message_id} not completed"
        time.sleep(10)
        stack.reconcile(token, JOB_WAIT)


@pytest.mark.timeout(3 * JOB_WAIT)
def test_the_reconcile_dag_runs_on_schedule_and_replay_and_quality_follow_its_asset(
    stack: Stack,
) -> None:
    _wait_for_success(stack, "ackfold_reconcile", JOB_WAIT, "scheduled")
    _wait_for_success(stack, "ackfold_replay", JOB_WAIT, "asset_triggered")
    # The quality checks run and pass: the ledger checks on the demo's ledger, and the
    # delivery checks over what is overdue (a violation fails the run).
    _wait_for_success(stack, "ackfold_quality", JOB_WAIT, "asset_triggered")


@pytest.fixture(scope="module")
def dead_letter(stack: Stack) -> str:
    """A dead-lettered root of the demo, once its ledger is reconciled (by now, the demo's
    report is out: `test_make_run_shows_the_demo_report_then_keeps_the_app_running`)."""
    assert (USERS[VIEWER], USERS[USER]) == ("viewer", "user")
    stack.wait_for_log("the app keeps running", DEMO_WAIT)
    status, body = stack.call("GET", "/ackfold/api/roots?status=dead_lettered", token=stack.token())
    assert status == 200, body
    assert body["roots"], "the demo dead-letters its poison and stuck messages"
    return str(body["roots"][0]["root_id"])


def _replay(stack: Stack, token: str, root_id: str) -> tuple[int, Any]:
    status, csrf = stack.call("GET", "/ackfold/api/csrf", token=token)
    assert status == 200, csrf
    return stack.call(
        "POST",
        "/ackfold/api/replay",
        {"root_ids": [root_id], "dry_run": True},
        token=token,
        headers={csrf["header"]: csrf["csrf_token"]},
    )


# Roles (`airflow.users`, Airflow's simple auth manager): a Viewer reads every Reliability
# page and JSON endpoint and is refused a replay, saying which role it takes; a User
# triggers one (a dry run), recorded as theirs.


def test_a_viewer_reads_every_page_and_endpoint_but_cannot_replay(
    stack: Stack, dead_letter: str
) -> None:
    token = stack.token(VIEWER)
    for path in (
        "/ackfold/overview", "/ackfold/roots", f"/ackfold/roots/{dead_letter}",
        "/ackfold/dead-letters", "/ackfold/quality", "/ackfold/api/overview",
        "/ackfold/api/roots", f"/ackfold/api/roots/{dead_letter}", "/ackfold/api/dead-letters",
        "/ackfold/api/quality", "/ackfold/api/apps", "/ackfold/api/csrf",
    ):  # fmt: skip
        status, text = stack.page(path, token)
        assert status == 200, (path, text[:500])
    status, roots = stack.page("/ackfold/roots?status=dead_lettered", token)
    assert 'id="replay-selected"' not in roots
    assert "Read only: replaying needs an Airflow role" in roots

    status, refused = _replay(stack, token, dead_letter)
    assert status == 403, refused
    assert refused["detail"].startswith(REFUSED)
    assert "(User, Op or Admin)" in refused["detail"]
    # Airflow's own API, asked directly, refuses the viewer too.
    direct = stack.call(
        "POST",
        f"/api/v2/dags/{MANUAL_REPLAY_DAG_ID}/dagRuns",
        {"logical_date": None, "conf": {"root_ids": [dead_letter]}},
        token=token,
    )
    assert direct[0] == 403, direct


def test_a_user_triggers_a_dry_run_replay_recorded_as_theirs(
    stack: Stack, dead_letter: str
) -> None:
    token = stack.token(USER)
    status, roots = stack.page("/ackfold/roots?status=dead_lettered", token)
    assert status == 200
    assert 'id="replay-selected"' in roots
    status, triggered = _replay(stack, token, dead_letter)
    assert status == 200, triggered
    assert triggered["dry_run"] is True
    status, run = stack.call(
        "GET", f"/api/v2/dags/{MANUAL_REPLAY_DAG_ID}/dagRuns/{triggered['run_id']}", token=token
    )
    assert status == 200, run
    assert run["conf"]["root_ids"] == [dead_letter]
    assert run["conf"]["dry_run"] is True
    assert run["triggering_user_name"] == USER


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
