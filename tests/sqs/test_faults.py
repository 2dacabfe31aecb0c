"""Faults against the real ElasticMQ: processes killed mid-batch, the queue down during a
replay. In each, the test shows what the user sees and that no message disappears."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ackfold.config import Settings, load_settings
from ackfold.demo.feed import send_bodies
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import REPLAY_LOG
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replayer import Replayer
from ackfold.sources.base import ATTEMPT
from ackfold.sources.sqs_client import sqs_client
from ackfold_dev.elasticmq import ElasticMQ
from ackfold_dev.ports import free_port, port_held
from tests.conftest import JARS_DIR, PROJECT_DIR
from tests.sqs.topology import APP, NumbersApp, body, create_queue, drain

ACKFOLD = Path(sys.executable).parent / "ackfold"
KILLED = -signal.SIGKILL


@pytest.fixture
def configure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., dict[str, str]]:
    """Set ACKFOLD_* for this test (and return them, for its subprocesses)."""

    def apply(endpoint: str, **extra: str) -> dict[str, str]:
        env = {
            "ACKFOLD_VAR_DIR": str(tmp_path / "var"),
            "ACKFOLD_JARS_DIR": str(JARS_DIR),
            "ACKFOLD_SPARK__MASTER": "local[2]",
            "ACKFOLD_SQS__ENDPOINT_URL": endpoint,
            "ACKFOLD_SQS__WAIT_TIME": "1s",
            "ACKFOLD_SQS__VISIBILITY_TIMEOUT": "6s",
            "ACKFOLD_DEFAULTS__REPLAY_BACKOFF": "1s",
            "ACKFOLD_DEFAULTS__REPLAY_RATE": "1000",
            **extra,
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return env

    for name in list(os.environ):
        if name.startswith("ACKFOLD_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return apply


def worker(point: str, queue: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run tests/sqs/worker.py in a process group of its own, and clear the group after."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.sqs.worker", point, queue],
        cwd=PROJECT_DIR,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the JVM, if it outlived its driver
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def new_app(spark: SparkSession, settings: Settings) -> NumbersApp:
    queue = f"faults-{uuid.uuid4().hex[:8]}"
    create_queue(sqs_client(settings), queue)
    return NumbersApp(spark, settings, queue)


def registered(app: NumbersApp) -> Counter[str]:
    """How many `roots` rows each SQS message id has (0 if the table is not there yet)."""
    if not Path(app.ledger.path("roots"), "_delta_log").is_dir():
        return Counter()
    return Counter(r["source_message_id"] for r in app.roots())


def in_flight(app: NumbersApp) -> int:
    attributes = app.queue.client.get_queue_attributes(
        QueueUrl=app.queue.url(app.queue.queue),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(v) for v in attributes.values())


def take_in(app: NumbersApp, messages: int, timeout: float = 120) -> None:
    """Poll until `messages` more are received and registered (SQS redelivers them once
    their visibility timeout ends)."""
    deadline = time.monotonic() + timeout
    received = 0
    while received < messages and time.monotonic() < deadline:
        received += app.ingester.poll()
    assert received == messages


def test_ingester_killed_after_receiving_loses_nothing(
    spark: SparkSession, sqs_server: Any, configure: Callable[..., dict[str, str]]
) -> None:
    env = configure(sqs_server.endpoint_url)
    app = new_app(spark, load_settings())
    sent = send_bodies(app.queue.client, app.queue.url(app.queue.queue), map(body, range(25)))

    done = worker("received", app.queue.queue, env)
    assert done.returncode == KILLED, done.stderr
    assert "killed at received" in done.stdout
    assert registered(app) == Counter(), "nothing was registered"
    assert in_flight(app) == 25, "SQS still holds every message, invisible for now"

    # After the visibility timeout SQS delivers them again, and they register.
    take_in(app, 25)
    assert registered(app) == Counter(dict.fromkeys(sent, 1))
    assert in_flight(app) == 0


def test_ingester_killed_after_registering_delivers_again_under_the_same_roots(
    spark: SparkSession, sqs_server: Any, configure: Callable[..., dict[str, str]]
) -> None:
    env = configure(sqs_server.endpoint_url)
    app = new_app(spark, load_settings())
    sent = send_bodies(app.queue.client, app.queue.url(app.queue.queue), map(body, range(25)))

    done = worker("registered", app.queue.queue, env)
    assert done.returncode == KILLED, done.stderr
    # It died after registering its first batch: all 25 on an idle machine, fewer when the
    # batch's receive deadline (a quarter of the visibility timeout) passed first.
    first = registered(app)
    assert first, "the first batch was registered"
    assert set(first) <= set(sent)
    assert set(first.values()) == {1}, "registered, not deleted"
    assert in_flight(app) == 25

    take_in(app, 25)
    assert registered(app) == Counter({m: 1 + (m in first) for m in sent}), (
        "each message delivered again is a counted duplicate"
    )
    assert in_flight(app) == 0
    app.process()
    app.reconcile()
    states = app.states()
    assert len(states) == 25, "a duplicate delivery is the same root"
    assert {s["status"] for s in states.values()} == {status.COMPLETED}
    assert {s["event_count"] for s in states.values()} == {2}, "duplicate events dropped"


def test_replay_killed_between_sending_and_marking_resends_each_message_at_most_once(
    spark: SparkSession, sqs_server: Any, configure: Callable[..., dict[str, str]]
) -> None:
    env = configure(sqs_server.endpoint_url, ACKFOLD_REPLAY__CHUNK="10")
    app = new_app(spark, load_settings())
    url = app.queue.url(app.queue.queue)
    send_bodies(app.queue.client, url, [body(i, fail_until=1) for i in range(12)])
    app.ingest()
    app.process()
    app.reconcile()
    failed = {r for r, s in app.states().items() if s["status"] == status.FAILED}
    assert len(failed) == 12

    done = worker("replay", app.queue.queue, env)
    assert done.returncode == KILLED, done.stderr
    log = spark.read.format("delta").load(app.ledger.path(REPLAY_LOG)).collect()
    assert {r["root_id"] for r in log} == failed, "every send was logged before the first"
    assert {r["event"] for r in log} == {"planned"}, "killed before marking"

    rerun = app.auto_replay()
    assert (rerun.sent, rerun.resent) == (12, 12), "everything unmarked is sent again"
    # Each copy registers as the same new root: 10 duplicates, counted, none lost.
    before = app.ingester.stats.duplicates
    app.ingest()
    assert in_flight(app) == 0
    copies = Counter(r["root_id"] for r in app.roots() if r["attempt"] == 2)
    assert len(copies) == 12, "no message lost"
    # Copies in one batch register once; copies in two batches are two rows of one root.
    duplicates = app.ingester.stats.duplicates - before + sum(copies.values()) - len(copies)
    assert duplicates == 10, "the first chunk was sent twice, the rest once"
    app.process()
    app.reconcile()
    states = app.states()
    assert {states[r]["status"] for r in copies} == {status.COMPLETED}
    assert {states[r]["status"] for r in failed} == {status.REPLAYED}
    assert app.auto_replay().sent == 0, "marked now: a further run sends nothing"


def test_replay_with_the_queue_down_says_so_and_a_later_run_sends_exactly_the_rest(
    spark: SparkSession, configure: Callable[..., dict[str, str]], tmp_path: Path
) -> None:
    port = free_port()
    env = configure(
        f"http://127.0.0.1:{port}",
        ACKFOLD_SQS__MAX_RETRIES="1",
        ACKFOLD_REPLAY__SEND_ATTEMPTS="2",
        ACKFOLD_REPLAY__SEND_BACKOFF="1s",
    )
    settings = load_settings()
    server = ElasticMQ(settings, port=port, log_file=tmp_path / "elasticmq-1.log")
    with server:
        app = new_app(spark, settings)
        url = app.queue.url(app.queue.queue)
        bodies = [body(i, fail_until=1) for i in range(5)]
        send_bodies(app.queue.client, url, bodies)
        app.ingest()
        app.process()
        app.reconcile()
    # The queue is down: the replay retries, then says what it could not send.
    with port_held(port):
        done = subprocess.run(
            [str(ACKFOLD), "replay", "--app", APP, "--yes"],
            env={**os.environ, **env},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ackfold: 5 message(s) not sent: SQS is unreachable at "), last
    assert f"http://127.0.0.1:{port}" in last
    assert "run `ackfold replay` again to send exactly those" in last
    assert "retrying in 1s" in done.stderr
    assert "Traceback" not in done.stderr
    log = spark.read.format("delta").load(app.ledger.path(REPLAY_LOG)).collect()
    assert sorted(r["event"] for r in log) == ["failed"] * 5 + ["planned"] * 5
    assert all("unreachable" in r["error"] for r in log if r["event"] == "failed")

    # Back up (an empty server, as after a restart): a later run sends exactly those five.
    with ElasticMQ(settings, port=port, log_file=tmp_path / "elasticmq-2.log"):
        create_queue(app.queue.client, app.queue.queue)
        replayer = Replayer(spark, settings)
        summary = replayer.execute(replayer.plan(ReplayRequest(app=APP, requested_by="test")))
        assert (summary.sent, summary.resent, summary.not_sent) == (5, 5, 0)
        resent = drain(app.queue.client, url)
        assert sorted(m["Body"] for m in resent) == sorted(bodies)
        assert {m["MessageAttributes"][ATTEMPT]["StringValue"] for m in resent} == {"2"}
        marked = spark.read.format("delta").load(app.ledger.path(REPLAY_LOG)).collect()
        sent = [r for r in marked if r["event"] == "sent"]
        assert sorted(r["root_id"] for r in sent) == sorted({r["root_id"] for r in log})
        assert all(r["sent_at"] is not None and r["message_id"] for r in sent)
        states = app.states()
        assert sorted(s["status"] for s in states.values()) == [status.REPLAYED] * 5
