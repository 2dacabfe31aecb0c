"""Which roots a retention run takes: the settled ones, read from what changed since the
last run, and all of them once a week.

A retention run deletes the events, older than its cut-off, of the roots `completed` or
`completed_late` before it (`ackfold.ledger.housekeeping.maintenance`). Read whole, that
set grows with every day the ledger keeps: `root_state` keeps its rows for ever. But a
root that a run took, and that has not changed since, has no events left before that
run's cut-off. So each run records its cut-off in `root_state`'s properties
(`CUTOFF`), and the next reads only the rows whose status changed, or whose last event
came, since then (`CHANGED`): on the embedded engine, from only the files whose
statistics in the log say they may hold one (`changed_file`); in Spark, Delta's data
skipping does the same.

What that leaves: events of a root that came after it settled and after a run took it
(an event read again, a copy). A full pass takes them: a run reads every settled root
when no full pass is recorded within `FULL_PASS_EVERY` (`FULL_CUTOFF`), when no cut-off
is recorded at all (a new ledger, or one kept by an earlier ackfold), or when the
cut-off went back (a longer `maintenance.retention`). So a late event still goes, on a
later run, as the retention promises.

Example:
    >>> from datetime import UTC, datetime
    >>> cutoff = datetime(2027, 1, 10, tzinfo=UTC)
    >>> retention_since({}, cutoff) is None                 # nothing recorded: a full pass
    True
    >>> marks = retention_marks(cutoff, since=None)
    >>> retention_since(marks, datetime(2027, 1, 11, tzinfo=UTC)) == cutoff
    True
    >>> retention_since(marks, datetime(2027, 1, 17, tzinfo=UTC)) is None  # a week on
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

# `root_state`'s properties: the cut-off of the last retention run, and of its last full pass.
CUTOFF: Final = "ackfold.retention.cutoff"
FULL_CUTOFF: Final = "ackfold.retention.fullCutoff"
FULL_PASS_EVERY: Final = timedelta(days=7)
# Delta keeps a timestamp's statistics in milliseconds, truncated: a file whose newest
# change is within a millisecond before `since` is read too.
STATS_MARGIN: Final = timedelta(milliseconds=1)
# The columns that say a root changed: its status, or its last event.
CHANGED: Final = ("status_changed_at", "last_event_at")


def retention_since(properties: Mapping[str, str], cutoff: datetime) -> datetime | None:
    """Where a retention run at `cutoff` reads `root_state`'s changes from: the last run's
    cut-off, recorded in `properties` (`root_state`'s), or None for a full pass."""
    last, full = _moment(properties.get(CUTOFF)), _moment(properties.get(FULL_CUTOFF))
    if last is None or full is None or last > cutoff or cutoff - full >= FULL_PASS_EVERY:
        return None
    return last


def retention_marks(cutoff: datetime, since: datetime | None) -> dict[str, str]:
    """The properties a run at `cutoff` that read from `since` (None: a full pass) leaves on
    `root_state`, once its events are deleted."""
    moment = cutoff.astimezone(UTC).isoformat()
    return {CUTOFF: moment} if since is not None else {CUTOFF: moment, FULL_CUTOFF: moment}


def changed_file(action: Mapping[str, Any], since: datetime) -> bool:
    """Whether a data file of `root_state` may hold a row changed at or after `since`, by
    its add action as delta-rs flattens it (`max.<column>`): a file without statistics
    may."""
    for column in CHANGED:
        newest = action.get(f"max.{column}")
        if newest is None:
            return True
        if newest.tzinfo is None:
            newest = newest.replace(tzinfo=UTC)
        if newest >= since - STATS_MARGIN:
            return True
    return False


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None  # not ours, or damaged: a full pass
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
