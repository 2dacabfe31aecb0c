"""Ingest from the real ElasticMQ, process, reconcile, replay: every message completes or
is dead-lettered, none is lost, and replays are idempotent."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ackfold.config import Settings, load_settings
from ackfold.demo.feed import send_bodies
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import DEAD_LETTERS, REPLAY_LOG
from ackfold.replay.planner import DEAD_LETTER, REPLAY
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replayer import Replayer
from ackfold.sources.base import ATTEMPT, DEAD_LAST_STAGE, DEAD_REASON, DEAD_ROOT_ID, ORIGIN_ROOT_ID
from ackfold.sources.sqs_client import sqs_client
from tests.conftest import JARS_DIR
from tests.sqs.topology import NumbersApp, body, create_queue, drain


def sqs_settings(tmp_path: Any, endpoint: str, **overrides: Any) -> Settings:
    overrides.setdefault("var_dir", tmp_path / "var")
    return load_settings(
        jars_dir=JARS_DIR,
        spark={"master": "local[2]"},
        sqs={"endpoint_url": endpoint, "wait_time": "1s", "visibility_timeout": "30s"},
        defaults={"max_attempts": 3, "replay_backoff": "1s", "replay_rate": 1000},
        **overrides,
    )


@pytest.fixture
def app(spark: SparkSession, sqs_server: Any, tmp_path: Any) -> NumbersApp:
    settings = sqs_settings(tmp_path, sqs_server.endpoint_url)
    queue = f"numbers-{uuid.uuid4().hex[:8]}"
    create_queue(sqs_client(settings), queue)
    return NumbersApp(spark, settings, queue)


def test_every_message_completes_or_is_dead_lettered_and_none_is_lost(app: NumbersApp) -> None:
    """...and replays are idempotent, and a dead letter replayed by hand comes back."""
    client = app.queue.client
    url = app.queue.url(app.queue.queue)
    good = {i: body(i) for i in range(20)}
    flaky = {100 + i: body(100 + i, fail_until=1) for i in range(5)}  # fixed by one replay
    doomed = {200: body(200, fail_until=3)}  # fails on every allowed attempt (3)
    poison = {-1: body(-1), -2: body(-2)}
    malformed = ["not json at all", '{"n": "seven"}']
    bodies = [*good.values(), *flaky.values(), *doomed.values(), *poison.values(), *malformed]
    message_ids = send_bodies(client, url, bodies)

    sent_per_cycle = []
    for _ in range(6):
        summary = app.cycle()
        sent_per_cycle.append((summary.sent, summary.dead_lettered))
        if summary.sent == summary.dead_lettered == 0:
            break
    # attempt 1 fails 10 roots; attempt 2 fixes 5 flaky ones; attempt 3 fails the rest.
    assert sent_per_cycle == [(10, 0), (5, 0), (0, 5), (0, 0)]

    roots = app.roots()
    states = app.states()
    first = {r["source_message_id"]: r for r in roots if r["attempt"] == 1}
    assert set(first) == set(message_ids), "every message sent is registered"
    by_origin: dict[int, list[str]] = {}
    for root in roots:
        by_origin.setdefault(root["origin_root_id"], []).append(states[root["root_id"]]["status"])
    outcome = {}
    for message_id, root in first.items():
        statuses = by_origin[root["root_id"]]
        assert status.PENDING not in statuses
        assert status.TIMED_OUT not in statuses
        done = statuses.count(status.COMPLETED) == 1
        dead = statuses.count(status.DEAD_LETTERED) == 1
        assert done != dead, (message_id, statuses)  # exactly one outcome: none lost
        outcome[root["payload"]] = "completed" if done else "dead"

    expected_dead = {*doomed.values(), *poison.values(), *malformed}
    assert {b for b, o in outcome.items() if o == "dead"} == expected_dead
    assert app.outputs() == {
        first[m]["root_id"]: n for m, n in zip(message_ids, [*good, *flaky], strict=False)
    }

    # The dead-letter queue holds each dead root once, with why and where it stopped.
    letters = drain(client, app.queue.url(f"{app.queue.queue}-dlq"))
    assert sorted(m["Body"] for m in letters) == sorted(expected_dead)
    for message in letters:
        attrs = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
        assert attrs[DEAD_LAST_STAGE] == "parse"
        assert attrs[DEAD_REASON].startswith("failed in parse: ")
        assert int(attrs[ATTEMPT]) == 4  # a redrive from the DLQ is the next attempt
        dead_root = states[int(attrs[DEAD_ROOT_ID])]
        assert dead_root["status"] == status.DEAD_LETTERED
        assert int(attrs[ORIGIN_ROOT_ID]) == dead_root["origin_root_id"]
    table = app.spark.read.format("delta").load(app.ledger.path(DEAD_LETTERS)).collect()
    assert {r["root_id"] for r in table} == {
        int(m["MessageAttributes"][DEAD_ROOT_ID]["StringValue"]) for m in letters
    }
    reasons = {r["reason"] for r in table}
    assert "failed in parse: poison: n is negative" in reasons
    assert "failed in parse: malformed body: not JSON with an integer n" in reasons
    assert drain(client, url) == [], "the source queue is empty: everything was taken in"

    # Idempotent: another replay run sends nothing and logs nothing new.
    log_rows = app.spark.read.format("delta").load(app.ledger.path(REPLAY_LOG)).count()
    again = app.auto_replay()
    assert (again.sent, again.dead_lettered, again.resent) == (0, 0, 0)
    assert app.spark.read.format("delta").load(app.ledger.path(REPLAY_LOG)).count() == log_rows

    # A dead letter replayed by hand comes back, as an SQS redrive would bring it.
    origin = next(r["root_id"] for r in first.values() if r["payload"] == doomed[200])
    dead = next(
        s["root_id"]
        for s in states.values()
        if s["origin_root_id"] == origin and s["status"] == status.DEAD_LETTERED
    )
    replayer = Replayer(app.spark, app.settings)
    request = ReplayRequest(root_ids=(dead,), statuses=(status.DEAD_LETTERED,), requested_by="test")
    plan = replayer.plan(request)
    assert [(p.action, p.attempt) for p in plan.sends] == [(REPLAY, 4)]
    assert replayer.execute(plan).sent == 1
    app.cycle()
    states = app.states()
    assert states[dead]["status"] == status.REPLAYED
    back = [
        s
        for s in states.values()
        if s["origin_root_id"] == origin and s["status"] == status.COMPLETED
    ]
    assert [s["attempt"] for s in back] == [4]
    assert app.outputs()[origin] == 200
    letter = next(
        r
        for r in app.spark.read.format("delta").load(app.ledger.path(DEAD_LETTERS)).collect()
        if r["root_id"] == dead
    )
    assert letter["redriven_at"] is not None
    assert letter["redrive_root_id"] == back[0]["root_id"]


def test_automatic_replay_waits_its_backoff_but_a_dead_letter_does_not(
    app: NumbersApp,
) -> None:
    """Attempt k is replayed replay_backoff * 2**(k-1) after it failed, not sooner; a root
    out of attempts is dead-lettered at once."""
    client = app.queue.client
    send_bodies(client, app.queue.url(app.queue.queue), [body(1, fail_until=5), body(-1)])
    app.ingest()
    app.process()
    app.reconcile()
    failed = {s["root_id"]: s for s in app.states().values()}
    assert {s["status"] for s in failed.values()} == {status.FAILED}
    changed = max(s["status_changed_at"] for s in failed.values()).replace(tzinfo=UTC)

    def planned(at: datetime) -> list[tuple[str, int]]:
        plan = Replayer(app.spark, app.settings, now=at).plan(
            ReplayRequest(automatic=True, app=app.ingester.app, requested_by="test")
        )
        return sorted((p.action, p.attempt) for p in plan.sends)

    # replay_backoff is 1s: attempt 1 waits 1 s.
    assert planned(changed + timedelta(milliseconds=500)) == []
    assert planned(changed + timedelta(seconds=1)) == [(REPLAY, 2), (REPLAY, 2)]

    # With max_attempts 1, both are out of attempts: dead-lettered without waiting.
    strict = app.settings.model_copy(
        update={"defaults": app.settings.defaults.model_copy(update={"max_attempts": 1})}
    )
    plan = Replayer(app.spark, strict, now=changed).plan(
        ReplayRequest(automatic=True, app=app.ingester.app, requested_by="test")
    )
    assert sorted((p.action, p.attempt) for p in plan.sends) == [
        (DEAD_LETTER, 2),
        (DEAD_LETTER, 2),
    ]
