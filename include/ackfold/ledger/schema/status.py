"""The statuses of a root in ``root_state``.

``pending`` -> ``completed`` | ``failed`` | ``timed_out`` -> ``replayed`` -> ``dead_lettered``;
a root that completes after it was replayed or dead-lettered is ``completed_late``.

Example:
    >>> from ackfold.ledger.schema import status
    >>> status.COMPLETED in status.SETTLED, status.TIMED_OUT in status.SETTLED
    (True, False)
"""

from __future__ import annotations

from typing import Final

PENDING: Final = "pending"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
TIMED_OUT: Final = "timed_out"
REPLAYED: Final = "replayed"
DEAD_LETTERED: Final = "dead_lettered"
COMPLETED_LATE: Final = "completed_late"

ALL: Final[tuple[str, ...]] = (
    PENDING,
    COMPLETED,
    FAILED,
    TIMED_OUT,
    REPLAYED,
    DEAD_LETTERED,
    COMPLETED_LATE,
)

# Final outcomes: later events change nothing, except that a replayed or dead-lettered
# root whose tree completes after all becomes completed_late (a duplicate delivery).
SETTLED: Final[tuple[str, ...]] = (COMPLETED, COMPLETED_LATE, FAILED, REPLAYED, DEAD_LETTERED)

# Still waiting for events: the reconciler re-classifies these on every run.
OPEN: Final[tuple[str, ...]] = (PENDING, TIMED_OUT)

# A new attempt replaced these roots; their own late completion is completed_late.
SUPERSEDED: Final[tuple[str, ...]] = (REPLAYED, DEAD_LETTERED)

# Waiting for an event, a timeout or a replay: not done yet, however old. The reconciler
# keeps them open wherever they sit in time; the automatic replay and the quality checks
# look for them there too.
UNSETTLED: Final[tuple[str, ...]] = (PENDING, TIMED_OUT, FAILED)


def checked(value: str) -> str:
    """`value` if it is a status (what a statement may quote), else ValueError."""
    if value not in ALL:
        raise ValueError(f"{value!r} is not a root status: one of {', '.join(ALL)}")
    return value
