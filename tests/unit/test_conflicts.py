"""The retry policy of Delta's concurrent-modification conflicts
(`ackfold.ledger.storage.conflicts`):
which errors it retries, how long it waits, what it logs, when and how it gives up; and
that the JVM-free writer's retried append writes once. The Spark tier makes real
conflicts between two writers (`tests/spark/test_conflicts.py`)."""

from __future__ import annotations

import doctest
import logging
from pathlib import Path
from typing import Any

import pytest

from ackfold.ledger.errors import LedgerConflict, LedgerError
from ackfold.ledger.storage import conflicts
from ackfold.ledger.storage.conflicts import CONFLICTS, RetryPolicy, conflict_of, retry_conflicts

POLICY = RetryPolicy(attempts=4, first_wait=0.25, max_wait=1.0, jitter=0)


def test_docstring_examples_run() -> None:
    result = doctest.testmod(conflicts)
    assert result.attempted > 0
    assert result.failed == 0


class Flaky:
    """An action that raises `errors` one per call, then returns "done"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def named(name: str, text: str = "lost the race") -> Exception:
    return type(name, (Exception,), {})(text)


@pytest.mark.parametrize("name", CONFLICTS)
def test_each_conflict_is_retried_until_the_commit_goes_through(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    action = Flaky(named(name), named(name))
    slept: list[float] = []
    with caplog.at_level(logging.WARNING, "ackfold.ledger.storage.conflicts"):
        got = retry_conflicts(
            action, what="MERGE into /w/root_state", policy=POLICY, sleep=slept.append
        )
    assert got == "done"
    assert action.calls == 3
    assert slept == [0.25, 0.5]
    assert [r.getMessage() for r in caplog.records] == [
        f"MERGE into /w/root_state: {name} (a concurrent commit got there first); "
        f"try {k} of 4 in {wait:.1f} s"
        for k, wait in ((2, 0.25), (3, 0.5))
    ]


def test_it_gives_up_after_the_last_try_and_says_what_and_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lost = [named("ConcurrentAppendException") for _ in range(4)]
    action = Flaky(*lost)
    slept: list[float] = []
    with (
        caplog.at_level(logging.WARNING, "ackfold.ledger.storage.conflicts"),
        pytest.raises(LedgerConflict) as raised,
    ):
        retry_conflicts(action, what="append to /w/ack_events", policy=POLICY, sleep=slept.append)
    assert action.calls == 4
    assert slept == [0.25, 0.5, 1.0], "bounded by max_wait; no wait after the last try"
    message = str(raised.value)
    assert message.startswith(
        "append to /w/ack_events lost to a concurrent commit on each of its 4 tries "
        "(ConcurrentAppendException): another writer kept changing the table."
    )
    assert "docs/decisions/many-hosts.md" in message
    assert raised.value.__cause__ is lost[-1]
    assert isinstance(raised.value, LedgerError), "the CLI reports it like any ledger error"
    assert caplog.records[-1].levelno == logging.ERROR
    assert "giving up" in caplog.records[-1].getMessage()


def test_other_errors_pass_through_at_once() -> None:
    action = Flaky(ValueError("[UNRESOLVED_COLUMN] no column nope"))
    slept: list[float] = []
    with pytest.raises(ValueError, match="UNRESOLVED_COLUMN"):
        retry_conflicts(action, what="append", policy=POLICY, sleep=slept.append)
    assert (action.calls, slept) == (1, [])


class ConnectError(Exception):
    """What Spark Connect raises: the Delta class does not cross, its condition does."""

    def __init__(self, condition: str | None) -> None:
        super().__init__(f"[{condition}] Transaction conflict detected")
        self.condition = condition

    def getCondition(self) -> str | None:
        return self.condition


def test_conflicts_are_recognized_however_they_surface() -> None:
    from delta.exceptions.base import ConcurrentDeleteReadException, MetadataChangedException
    from deltalake.exceptions import CommitFailedError

    assert conflict_of(MetadataChangedException("changed")) == "MetadataChangedException"
    assert conflict_of(ConcurrentDeleteReadException("gone")) == "ConcurrentDeleteReadException"
    assert conflict_of(CommitFailedError("Failed to commit transaction: 15")) == "CommitFailedError"
    assert (
        conflict_of(ConnectError("DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT"))
        == "ConcurrentAppendException"
    )
    assert conflict_of(ConnectError("DELTA_PROTOCOL_CHANGED")) == "ProtocolChangedException"
    assert conflict_of(ConnectError("DELTA_TABLE_NOT_FOUND")) is None
    py4j = RuntimeError(
        "An error occurred while calling o81.save.\n: "
        "io.delta.exceptions.ConcurrentTransactionException: [DELTA_CONCURRENT_TRANSACTION] ..."
    )
    assert conflict_of(py4j) == "ConcurrentTransactionException"
    # Wrapped, as the JVM-free writer wraps delta-rs's errors: found through the cause.
    wrapped = LedgerError("cannot write /w/roots: Failed to commit")
    wrapped.__cause__ = CommitFailedError("Failed to commit transaction: 15")
    assert conflict_of(wrapped) == "CommitFailedError"
    assert conflict_of(RuntimeError("ConcurrentAppendException mentioned in passing")) is None


def test_the_policy_is_bounded_and_jittered_below_its_wait() -> None:
    policy = RetryPolicy(attempts=6, first_wait=0.5, max_wait=8.0, jitter=0.5)
    for retry in range(1, 10):
        base = min(8.0, 0.5 * 2 ** (retry - 1))
        assert policy.wait(retry, lambda: 0.0) == base
        assert policy.wait(retry, lambda: 1.0) == base / 2
    waits = [RetryPolicy().wait(k) for k in range(1, RetryPolicy().attempts)]
    assert sum(waits) <= 0.5 + 1 + 2 + 4 + 8, "at most about 16 s before giving up"
    for bad in ({"attempts": 0}, {"first_wait": 2.0, "max_wait": 1.0}, {"jitter": 1.5}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)  # type: ignore[arg-type]


def test_a_retried_append_of_the_jvm_free_writer_writes_its_rows_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worst case: the commit landed, but the writer was told it failed (a lost
    answer). The retry finds its application transaction there and writes nothing."""
    import deltalake

    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.track.tracker import Tracker

    monkeypatch.setattr(conflicts.time, "sleep", lambda seconds: None)
    real = deltalake.write_deltalake
    failed: list[str] = []

    def lands_then_fails(table: Any, data: Any, **kwargs: Any) -> None:
        real(table, data, **kwargs)
        if not failed:
            failed.append(table.table_uri)
            raise deltalake.exceptions.CommitFailedError("Failed to commit transaction: 15")

    monkeypatch.setattr(deltalake, "write_deltalake", lands_then_fails)
    tracker = Tracker("orders")
    first = tracker.spout("o-1", source="sqs", source_queue="orders")
    tracker.ack(first, stage="store")
    writer = LedgerWriter(tmp_path)
    appended = writer.append(tracker.drain_roots(), tracker.drain(), app_id="p", version=1)
    assert failed, "the first commit reported a failure"
    assert appended.skipped == ("roots",), "its retry found version 1 of app id p there"
    roots = deltalake.DeltaTable(str(tmp_path / "roots")).to_pyarrow_table()
    events = deltalake.DeltaTable(str(tmp_path / "ack_events")).to_pyarrow_table()
    assert (roots.num_rows, events.num_rows) == (1, 2)
