"""A Kafka record as a replay sees it: its position's text form and its replay headers
(no broker: `tests/kafka/test_topic.py` re-reads and produces real records)."""

from __future__ import annotations

import doctest

from ackfold.sources import kafka_records
from ackfold.sources.base import ATTEMPT, DEAD_REASON, ORIGIN_ROOT_ID, Outbound
from ackfold.sources.kafka_records import replay_headers


def test_docstring_examples_run() -> None:
    result = doctest.testmod(kafka_records)
    assert result.attempted > 0
    assert result.failed == 0


def test_replay_headers_keep_the_records_own_and_replace_ackfolds() -> None:
    """A record re-read for attempt 3 keeps its own headers; the attempt-2 values it
    carried are replaced by the new attempt's, and a dead letter's reason is added."""
    original = [("trace", b"t-1"), (ORIGIN_ROOT_ID, b"7"), (ATTEMPT, b"2")]
    message = Outbound(9, 7, 3, None, {DEAD_REASON: "max attempts"})
    assert replay_headers(original, message) == [
        ("trace", b"t-1"),
        (ORIGIN_ROOT_ID, b"7"),
        (ATTEMPT, b"3"),
        (DEAD_REASON, b"max attempts"),
    ]
