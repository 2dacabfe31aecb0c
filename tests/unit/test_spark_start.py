"""A streaming query's start through Spark Connect is tried again when the server's Python
worker for its foreachBatch missed Spark's fixed 10 s window to connect back, and only
then. No server here: a writer stands in, failing with the server's own error."""

from __future__ import annotations

import logging
import re

import pytest
from pyspark.errors import PySparkException

from ackfold.spark import connect as spark_module
from ackfold.spark.connect import START_ATTEMPTS, start_query

LATE_WORKER = "Python worker failed to connect back."


class Writer:
    """Fails its first `failures` starts with `message`, then starts."""

    def __init__(self, failures: int, message: str = LATE_WORKER) -> None:
        self.failures, self.message, self.starts = failures, message, 0

    def start(self) -> str:
        self.starts += 1
        if self.starts <= self.failures:
            raise PySparkException(self.message)
        return "query"


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_module.time, "sleep", lambda seconds: None)


def test_a_late_worker_is_retried_and_said(caplog: pytest.LogCaptureFixture) -> None:
    writer = Writer(failures=START_ATTEMPTS - 1)
    with caplog.at_level(logging.WARNING, logger="ackfold.spark"):
        assert start_query(writer) == "query"  # type: ignore[arg-type]
    assert writer.starts == START_ATTEMPTS
    assert "did not start in time (attempt 1 of 3)" in caplog.text


def test_a_worker_late_every_time_raises_the_servers_error() -> None:
    writer = Writer(failures=START_ATTEMPTS)
    with pytest.raises(PySparkException, match=LATE_WORKER):
        start_query(writer)  # type: ignore[arg-type]
    assert writer.starts == START_ATTEMPTS


@pytest.mark.parametrize("error", ["[PATH_NOT_FOUND] no such checkpoint", "bad plan"])
def test_any_other_failure_is_raised_at_once(error: str) -> None:
    writer = Writer(failures=1, message=error)
    with pytest.raises(PySparkException, match=re.escape(error)):
        start_query(writer)  # type: ignore[arg-type]
    assert writer.starts == 1
