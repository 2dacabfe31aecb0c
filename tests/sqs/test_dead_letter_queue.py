"""A replay checks, before it logs or sends anything, that each dead-letter queue it sends
to exists: ackfold creates no queue outside the local stack, and a missing one is an error
naming the queue, the setting and the IAM permissions. Against the real ElasticMQ."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import REPLAY_LOG
from ackfold.runs.replay import run_replay
from ackfold.sources.base import SourceError
from ackfold_dev.elasticmq import ElasticMQ
from tests.replay_ledger import Failed, read_table, statuses, write_failed
from tests.sqs.conftest import Queue
from tests.sqs.test_replay_batches import AUTO, NOW, drain, origins, replay_settings


def test_a_missing_dead_letter_queue_stops_the_replay_before_it_sends(
    tmp_path: Path, sqs_server: ElasticMQ, sqs: Any, make_queue: Any
) -> None:
    queue: Queue = make_queue()  # no <queue>-dlq
    settings = replay_settings(tmp_path, sqs_server.endpoint_url)
    again = [Failed(n, queue=queue.name) for n in range(5)]
    spent = Failed(99, queue=queue.name, attempt=settings.app("orders").max_attempts)
    write_failed(settings.table_root, [*again, spent])

    with pytest.raises(SourceError) as caught:
        run_replay(settings, AUTO, now=NOW)
    message = str(caught.value)
    assert f"SQS dead-letter queue {queue.name}-dlq (of {queue.name}) does not exist" in message
    assert "apps.orders.dead_letter_queue (ACKFOLD_APPS__ORDERS__DEAD_LETTER_QUEUE)" in message
    assert "sqs:GetQueueUrl and sqs:SendMessage" in message
    # Checked first: nothing sent, nothing logged, no status changed.
    assert drain(sqs, queue.url) == []
    assert read_table(settings.table_root, REPLAY_LOG) == []
    assert set(statuses(settings.table_root).values()) == {status.FAILED}

    # Once it exists, the same run goes through.
    dlq_url = sqs.create_queue(QueueName=f"{queue.name}-dlq")["QueueUrl"]
    try:
        summary = run_replay(settings, AUTO, now=NOW)
        assert (summary.sent, summary.dead_lettered) == (5, 1)
        assert origins(drain(sqs, queue.url)) == Counter(r.origin for r in again)
        assert origins(drain(sqs, dlq_url)) == Counter({spent.origin: 1})
    finally:
        sqs.delete_queue(QueueUrl=dlq_url)


def test_a_run_with_nothing_to_dead_letter_needs_no_dead_letter_queue(
    tmp_path: Path, sqs_server: ElasticMQ, sqs: Any, make_queue: Any
) -> None:
    queue: Queue = make_queue()
    settings = replay_settings(tmp_path, sqs_server.endpoint_url)
    write_failed(settings.table_root, [Failed(n, queue=queue.name) for n in range(3)])
    assert run_replay(settings, AUTO, now=NOW).sent == 3
