"""Roles on the real `make run` (Airflow's simple auth manager, `airflow.users`): a Viewer
reads every Reliability page and JSON endpoint and is refused a replay, saying which role
it takes; a User triggers one (a dry run), recorded as theirs."""

from __future__ import annotations

from typing import Any

import pytest

from ackfold.replay.params import MANUAL_REPLAY_DAG_ID
from tests.embedded_stack import USERS, Stack

VIEWER, USER = "vic", "uma"
REFUSED = f"{VIEWER} may read these pages, but replaying needs an Airflow role that may trigger"


@pytest.fixture(scope="module")
def dead_letter(stack: Stack) -> str:
    """A dead-lettered root of the demo, once its ledger is reconciled."""
    assert (USERS[VIEWER], USERS[USER]) == ("viewer", "user")
    stack.wait_for_log("the app keeps running", 600)
    status, body = stack.call("GET", "/ackfold/api/roots?status=dead_lettered", token=stack.token())
    assert status == 200, body
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
