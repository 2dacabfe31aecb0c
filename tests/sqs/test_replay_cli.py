"""`ackfold replay` over a real ledger and the real ElasticMQ: dry run, confirmation,
progress, rate, summary, and requests that select nothing."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ackfold.cli import main as cli
from ackfold.config import load_settings
from ackfold.demo.feed import send_bodies
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import REPLAY_LOG
from ackfold.ledger.schema.values import hex64
from ackfold.sources.sqs_client import sqs_client
from tests.conftest import JARS_DIR
from tests.sqs.topology import APP, NumbersApp, body, create_queue, drain
from tests.unit.test_cli_read import Run


@pytest.fixture(scope="module")
def template(
    spark: SparkSession, sqs_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    """A var dir whose ledger holds 12 roots of `numbers` failed once (a replay fixes
    them), built once: each test works on a copy of it."""
    var = tmp_path_factory.mktemp("cli-template") / "var"
    settings = load_settings(
        var_dir=var,
        jars_dir=JARS_DIR,
        sqs={"endpoint_url": sqs_server.endpoint_url, "wait_time": "1s"},
    )
    queue = f"cli-{uuid.uuid4().hex[:8]}"
    create_queue(sqs_client(settings), queue)
    app = NumbersApp(spark, settings, queue)
    send_bodies(app.queue.client, app.queue.url(queue), [body(i, fail_until=1) for i in range(12)])
    app.ingest()
    app.process()
    app.reconcile()
    return var, queue


@pytest.fixture
def failed_app(
    spark: SparkSession,
    sqs_server: Any,
    template: tuple[Path, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> NumbersApp:
    """A copy of the template ledger, its queues empty, and the CLI's settings for it."""
    for name in list(os.environ):
        if name.startswith("ACKFOLD_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    var, queue = template
    shutil.copytree(var, tmp_path / "var")
    env = {
        "ACKFOLD_VAR_DIR": str(tmp_path / "var"),
        "ACKFOLD_JARS_DIR": str(JARS_DIR),
        "ACKFOLD_SQS__ENDPOINT_URL": sqs_server.endpoint_url,
        "ACKFOLD_SQS__WAIT_TIME": "1s",
        "ACKFOLD_REPLAY__CONFIRM_ABOVE": "5",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    app = NumbersApp(spark, load_settings(), queue)
    for name in (queue, f"{queue}-dlq"):  # what an earlier test sent
        drain(app.queue.client, app.queue.url(name))
    return app


def replay(capsys: pytest.CaptureFixture[str], *args: str) -> Run:
    code = cli.run(["replay", *args])
    out, err = capsys.readouterr()
    return Run(("replay", *args), code, out, err)


def statuses(app: NumbersApp) -> list[str]:
    return sorted(s["status"] for s in app.states().values())


def test_dry_run_reports_every_send_and_sends_nothing(
    failed_app: NumbersApp, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plan's fail reasons are masked as `roots`, `show` and the UI mask them.
    monkeypatch.setenv("ACKFOLD_UI__REDACT_PATTERNS", '["transient"]')
    run = replay(capsys, "--app", APP, "--dry-run")
    assert run.code == 0, run.err
    would = [line for line in run.err.splitlines() if line.startswith("would send ")]
    assert len(would) == 12
    assert all(
        " numbers failed -> attempt 2 to cli-" in line and ": *** failure" in line for line in would
    ), would
    assert "transient" not in run.err
    assert run.out.startswith("dry run, nothing sent: selected 12, sent 0,")
    assert drain(failed_app.queue.client, failed_app.queue.url(failed_app.queue.queue)) == []
    assert statuses(failed_app) == [status.FAILED] * 12
    log = failed_app.spark.read.format("delta").load(failed_app.ledger.path(REPLAY_LOG))
    assert [r["dry_run"] for r in log.collect()] == [True] * 12, "dry runs are logged as such"


def test_above_the_confirmation_count_it_needs_yes(
    failed_app: NumbersApp, capsys: pytest.CaptureFixture[str]
) -> None:
    run = replay(capsys, "--app", APP)
    assert run.code == 2
    assert run.err.splitlines()[-1] == (
        "ackfold: send 12 messages (replay.confirm_above is 5)? "
        "Not without --yes (or try --dry-run first)."
    )
    assert drain(failed_app.queue.client, failed_app.queue.url(failed_app.queue.queue)) == []


def test_a_replay_shows_progress_keeps_the_rate_and_sums_up(
    failed_app: NumbersApp, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    run = replay(capsys, "--app", APP, "--yes", "--rate", "4", "--json")
    elapsed = time.monotonic() - started
    assert run.code == 0, run.err
    assert "replay: 12/12 sent" in run.err
    summary = json.loads(run.out)
    assert (summary["selected"], summary["sent"], summary["not_sent"]) == (12, 12, 0)
    # Ten go at once (one SendMessageBatch); the next two wait 10 / 4 msg/s.
    assert elapsed >= 2.5
    sent = drain(failed_app.queue.client, failed_app.queue.url(failed_app.queue.queue))
    assert len(sent) == 12
    assert statuses(failed_app) == [status.REPLAYED] * 12

    # Asked again by id, a replayed root is skipped and the command says why.
    one = next(iter(failed_app.states()))
    again = replay(capsys, "--root", str(one), "--yes")
    assert again.code == 1
    assert "skipping 1 root(s): replayed: nothing to replay" in again.err
    assert hex64(one) not in again.out


def test_filters_that_match_nothing_say_so(
    failed_app: NumbersApp, capsys: pytest.CaptureFixture[str]
) -> None:
    run = replay(capsys, "--app", APP, "--since", "2099-01-01T00:00:00Z")
    assert run.code == 1
    assert run.err.startswith("ackfold: no roots match ")
    assert '"since": "2099-01-01 00:00:00+00:00"' in run.err


def test_reconcile_with_replay_applies_each_apps_policy(
    failed_app: NumbersApp, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One attempt allowed: the automatic replay dead-letters instead of replaying.
    monkeypatch.setenv("ACKFOLD_APPS__NUMBERS__MAX_ATTEMPTS", "1")
    monkeypatch.setenv("ACKFOLD_DEFAULTS__REPLAY_BACKOFF", "1s")
    time.sleep(1)
    code = cli.run(["reconcile", "--replay"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)["replay"]
    assert (summary["sent"], summary["dead_lettered"]) == (0, 12)
    queue = failed_app.queue
    assert len(drain(queue.client, queue.url(f"{queue.queue}-dlq"))) == 12
    assert statuses(failed_app) == [status.DEAD_LETTERED] * 12
