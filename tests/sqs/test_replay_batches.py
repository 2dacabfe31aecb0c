"""The embedded engine's replay against the real ElasticMQ, with no JVM of ackfold's own:
batches of SendMessageBatch, a refused entry retried alone, the write-ahead replay log, and
the queue going down in the middle of a run (nothing lost; the next run sends exactly the
rest)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from ackfold.config import Settings, load_settings
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import REPLAY_LOG
from ackfold.replay.bookkeeping import FAILED_SEND, PLANNED
from ackfold.replay.planner import SENT
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replay import run_replay
from ackfold.runs.replayer import Replayer
from ackfold.sources.base import ATTEMPT, ORIGIN_ROOT_ID
from ackfold_dev.elasticmq import ElasticMQ
from ackfold_dev.ports import Downtime, free_port
from tests.conftest import JARS_DIR
from tests.replay_ledger import T0, Failed, read_table, statuses, write_failed
from tests.sqs.conftest import Queue

NOW = T0 + timedelta(hours=1)
AUTO = ReplayRequest(automatic=True, requested_by="test")


def replay_settings(tmp_path: Path, endpoint: str, **sqs: Any) -> Settings:
    return load_settings(
        var_dir=tmp_path / "var", jars_dir=JARS_DIR, engine={"kind": "embedded"},
        sqs={"endpoint_url": endpoint, **sqs},
        defaults={"replay_backoff": "1s", "replay_rate": 100_000},
        replay={"chunk": 10, "send_attempts": 2, "send_backoff": "1s"},
    )  # fmt: skip


def drain(client: Any, url: str) -> list[dict[str, Any]]:
    """Every message on the queue, received and deleted, with its attributes."""
    found: list[dict[str, Any]] = []
    while True:
        messages = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
            MessageAttributeNames=["All"], VisibilityTimeout=60,
        ).get("Messages", [])  # fmt: skip
        if not messages:
            return found
        found.extend(messages)
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
        ]
        client.delete_message_batch(QueueUrl=url, Entries=entries)


def origins(messages: list[dict[str, Any]]) -> Counter[int]:
    return Counter(int(m["MessageAttributes"][ORIGIN_ROOT_ID]["StringValue"]) for m in messages)


def test_every_root_goes_back_once_in_batches_and_a_rerun_sends_nothing(
    tmp_path: Path, sqs_server: ElasticMQ, sqs: Any, make_queue: Any
) -> None:
    queue: Queue = make_queue()
    settings = replay_settings(tmp_path, sqs_server.endpoint_url)
    roots = [Failed(n, queue=queue.name) for n in range(45)]
    ids = write_failed(settings.table_root, roots)

    summary = run_replay(settings, AUTO, now=NOW)
    assert (summary.selected, summary.sent, summary.not_sent) == (45, 45, 0)
    sent = drain(sqs, queue.url)
    assert origins(sent) == Counter(r.origin for r in roots), "each root once"
    assert {m["MessageAttributes"][ATTEMPT]["StringValue"] for m in sent} == {"2"}
    assert sorted(m["Body"] for m in sent) == sorted(f'{{"n": {n}}}' for n in range(45))
    log = read_table(settings.table_root, REPLAY_LOG)
    assert Counter(r["event"] for r in log) == {PLANNED: 45, SENT: 45}
    ids_sent = {r["message_id"] for r in log if r["event"] == SENT}
    assert ids_sent == {m["MessageId"] for m in sent}
    assert set(statuses(settings.table_root).values()) == {status.REPLAYED}
    assert set(statuses(settings.table_root)) == set(ids)

    again = run_replay(settings, AUTO, now=NOW)
    assert (again.selected, again.sent) == (0, 0)
    assert drain(sqs, queue.url) == []


def test_an_entry_the_queue_refuses_is_retried_alone_and_stays_unsent(
    tmp_path: Path, sqs_server: ElasticMQ, sqs: Any, make_queue: Any
) -> None:
    """SQS answers a batch entry by entry: the entry it refused (a body with a character
    SQS does not take) is sent again, alone; the nine others of its batch went once."""
    queue: Queue = make_queue()
    settings = replay_settings(tmp_path, sqs_server.endpoint_url)
    roots = [Failed(n, queue=queue.name) for n in range(9)]
    bad = Failed(9, queue=queue.name, payload="bad \x00 body")
    write_failed(settings.table_root, [*roots, bad])

    summary = run_replay(settings, AUTO, now=NOW)
    assert (summary.sent, summary.not_sent) == (9, 1)
    assert "InvalidMessageContents" in (summary.last_error or ""), summary.last_error
    assert origins(drain(sqs, queue.url)) == Counter(r.origin for r in roots)
    log = read_table(settings.table_root, REPLAY_LOG)
    failed = [r for r in log if r["event"] == FAILED_SEND]
    assert [r["root_id"] for r in failed] == [bad.root_id]
    assert statuses(settings.table_root)[bad.root_id] == status.FAILED


def test_the_queue_down_mid_run_loses_nothing_and_the_next_run_sends_exactly_the_rest(
    tmp_path: Path,
) -> None:
    port = free_port()
    settings = replay_settings(tmp_path, f"http://127.0.0.1:{port}", max_retries=1)
    roots = [Failed(n, queue="replays") for n in range(30)]
    write_failed(settings.table_root, roots)
    before: list[dict[str, Any]] = []
    server = ElasticMQ(settings, port=port, log_file=tmp_path / "elasticmq-1.log")
    server.start()
    down = Downtime(server, port)
    try:
        client = server.client()
        url = client.create_queue(QueueName="replays")["QueueUrl"]

        def stop_after_the_first_chunk(sent: list[Any]) -> None:
            if not before:
                before.extend(drain(client, url))
                down()

        replayer = Replayer(None, settings, now=NOW)
        plan = replayer.plan(AUTO)
        summary = replayer.execute(plan, after_send=stop_after_the_first_chunk)
        replayer.close()
    finally:
        server.stop()
        down.end()
    assert (summary.sent, summary.not_sent) == (10, 20)
    assert "SQS is unreachable at" in (summary.last_error or "")
    assert len(before) == 10
    log = read_table(settings.table_root, REPLAY_LOG)
    assert Counter(r["event"] for r in log) == {PLANNED: 30, SENT: 10, FAILED_SEND: 10}
    assert Counter(statuses(settings.table_root).values()) == {
        status.REPLAYED: 10,
        status.FAILED: 20,
    }

    with ElasticMQ(settings, port=port, log_file=tmp_path / "elasticmq-2.log") as again:
        client = again.client()
        url = client.create_queue(QueueName="replays")["QueueUrl"]
        rerun = run_replay(settings, AUTO, now=NOW + timedelta(hours=1))
        assert (rerun.selected, rerun.sent, rerun.resent, rerun.not_sent) == (20, 20, 20, 0)
        after = drain(client, url)
    assert origins(before) + origins(after) == Counter(r.origin for r in roots), "once each"
    assert set(statuses(settings.table_root).values()) == {status.REPLAYED}
