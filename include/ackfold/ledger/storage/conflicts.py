"""Delta's concurrent-modification conflicts, retried: the one helper every ledger writer
calls around its commit (tracking appends, reconcile, replay bookkeeping, maintenance,
table creation, the JVM-free writer).

Delta commits optimistically. Two writers that change what the other read (a MERGE and
an append into the partition it read, two MERGEs, a metadata change under an append, two
creators of one table) cannot both win: the loser's commit raises one of Delta's conflict
exceptions (`CONFLICTS`) and commits nothing. Its data files stay unreferenced until
VACUUM. So trying again is safe, and `retry_conflicts` does, with bounded exponential
backoff, a log line per retry, and a `LedgerConflict` that says so when it gives up:

- a blind append commits its rows once: the attempt that lost committed none; an append
  with `txnAppId`/`txnVersion` whose commit did land (the answer was lost) is skipped by
  Delta on the retry, because that app id already holds that version;
- a MERGE, DELETE or OPTIMIZE reads the table again and decides again;
- `CREATE TABLE IF NOT EXISTS` finds the table the other creator made.

The action must build its write inside the call (a lazy DataFrame is fine: Spark plans
it again), never reuse a half-run commit.

Example:
    >>> calls = []
    >>> def append():
    ...     calls.append(1)
    ...     if len(calls) == 1:
    ...         raise type("ConcurrentAppendException", (Exception,), {})("lost the race")
    ...     return "committed"
    >>> retry_conflicts(append, what="append to ack_events", sleep=lambda s: None)
    'committed'
    >>> len(calls)
    2
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from ackfold.ledger.errors import LedgerConflict

log = logging.getLogger("ackfold.ledger.storage.conflicts")

T = TypeVar("T")

# Delta's conflict exceptions: delta-spark's `delta.exceptions`, also the Java classes
# `io.delta.exceptions.*` that they convert.
DELTA_CONFLICTS: Final = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "DeltaConcurrentModificationException",
)
# And delta-rs's commit that lost to another writer (after its own retries).
CONFLICTS: Final = (*DELTA_CONFLICTS, "CommitFailedError")
# Their error conditions, as Spark Connect reports them (the class does not cross).
CONDITIONS: Final = {
    "DELTA_CONCURRENT_APPEND": "ConcurrentAppendException",
    "DELTA_CONCURRENT_DELETE_READ": "ConcurrentDeleteReadException",
    "DELTA_CONCURRENT_DELETE_DELETE": "ConcurrentDeleteDeleteException",
    "DELTA_CONCURRENT_TRANSACTION": "ConcurrentTransactionException",
    "DELTA_CONCURRENT_WRITE": "ConcurrentWriteException",
    "DELTA_METADATA_CHANGED": "MetadataChangedException",
    "DELTA_PROTOCOL_CHANGED": "ProtocolChangedException",
}


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry: `attempts` tries in all; before try k + 1, a wait
    of `first_wait * 2**(k-1)` seconds, at most `max_wait`, less up to `jitter` of it at
    random (two writers that collided do not collide again in step)."""

    attempts: int = 6
    first_wait: float = 0.5
    max_wait: float = 8.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.first_wait < 0 or self.max_wait < self.first_wait:
            raise ValueError(f"not a retry policy: {self}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter is a fraction from 0 to 1, got {self.jitter}")

    def wait(self, retry: int, draw: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number `retry` (1: the second try).

        Example:
            >>> policy = RetryPolicy(first_wait=0.5, max_wait=3, jitter=0)
            >>> [policy.wait(k) for k in (1, 2, 3, 4, 5)]
            [0.5, 1.0, 2.0, 3, 3]
        """
        base = min(self.max_wait, self.first_wait * 2.0 ** (retry - 1))
        return base * (1 - self.jitter * draw()) if self.jitter else base


DEFAULT_POLICY: Final = RetryPolicy()


def conflict_of(error: BaseException) -> str | None:
    """The name of the Delta conflict `error` is (or was caused by), else None.

    Matched by class name (delta-spark's Python classes, delta-rs's), by error condition
    (Spark Connect), or by the Java class in the text (an unconverted Py4J error).

    Example:
        >>> conflict_of(RuntimeError("io.delta.exceptions.MetadataChangedException: ..."))
        'MetadataChangedException'
        >>> conflict_of(ValueError("no such column")) is None
        True
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for cls in type(current).__mro__:
            if cls.__name__ in CONFLICTS:
                return cls.__name__
        condition = _condition(current)
        if condition:
            name = CONDITIONS.get(condition.split(".")[0])
            if name:
                return name
        text = str(current)
        for condition, name in CONDITIONS.items():
            if f"[{condition}" in text:
                return name
        for name in DELTA_CONFLICTS:
            if f"io.delta.exceptions.{name}" in text:
                return name
        current = current.__cause__ or current.__context__
    return None


def _condition(error: BaseException) -> str | None:
    getter = getattr(error, "getCondition", None)
    if not callable(getter):
        return None
    try:
        value = getter()
    except Exception:  # a PySpark error built without one
        return None
    return value if isinstance(value, str) else None


def retry_conflicts(
    action: Callable[[], T],
    *,
    what: str,
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `action` (one commit: `what` names it in the log and the error, e.g. "MERGE
    into <path>"); on a Delta conflict wait and run it again, up to `policy.attempts`
    tries in all, then raise `LedgerConflict`. Any other error passes through at once."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return action()
        except Exception as exc:
            name = conflict_of(exc)
            if name is None:
                raise
            if attempt == policy.attempts:
                log.error("%s: %s on try %d of %d: giving up", what, name, attempt, attempt)
                raise LedgerConflict(
                    f"{what} lost to a concurrent commit on each of its {attempt} tries "
                    f"({name}): another writer kept changing the table. Run it again; if "
                    "it keeps failing, check that reconciles, replays and maintenance take "
                    "turns (docs/decisions/many-hosts.md) and that no other job rewrites "
                    "the table"
                ) from exc
            wait = policy.wait(attempt)
            log.warning(
                "%s: %s (a concurrent commit got there first); try %d of %d in %.1f s",
                what, name, attempt + 1, policy.attempts, wait,
            )  # fmt: skip
            sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover
