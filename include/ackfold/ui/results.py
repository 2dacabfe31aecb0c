"""What the Reliability UI's queries return (`ackfold.ui.queries.UiReader`): a page of
roots, a page of dead letters, the overview and its chart's buckets; each as JSON for the
UI's API."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, Final

from ackfold.ledger.reading.rows import RootState
from ackfold.ledger.schema.ids import shown_ids
from ackfold.ledger.schema.values import jsonable
from ackfold.ui.filters import DeadLetterFilter, RootFilter

# Bucket widths the overview chart chooses from: the smallest that gives at most
# MAX_BUCKETS buckets over the time span shown.
BUCKET_SECONDS: Final = (60, 300, 900, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)
MAX_BUCKETS: Final = 48


@dataclass(frozen=True)
class RootsPage:
    """One page of the roots table and how many roots match the filter in all."""

    roots: list[RootState]
    total: int
    filter: RootFilter

    @property
    def more(self) -> bool:
        return self.filter.offset + len(self.roots) < self.total

    def to_json(self) -> dict[str, Any]:
        return {
            "filter": self.filter.to_json(),
            "total": self.total,
            "more": self.more,
            "roots": [root.to_json() for root in self.roots],
        }


@dataclass(frozen=True)
class DeadLetter:
    """A `dead_letters` row."""

    root_id: int
    app: str
    origin_root_id: int
    attempt: int
    source: str
    source_queue: str | None
    dead_letter_queue: str
    reason: str
    last_stage: str | None
    message_id: str | None
    dead_lettered_at: datetime
    redriven_at: datetime | None
    redrive_root_id: int | None

    def to_json(self) -> dict[str, Any]:
        return shown_ids({f.name: jsonable(getattr(self, f.name)) for f in fields(self)})


DEAD_LETTER_COLUMNS: Final = tuple(f.name for f in fields(DeadLetter))


@dataclass(frozen=True)
class DeadLettersPage:
    letters: list[DeadLetter]
    more: bool
    filter: DeadLetterFilter

    def to_json(self) -> dict[str, Any]:
        return {
            "filter": self.filter.to_json(),
            "more": self.more,
            "dead_letters": [letter.to_json() for letter in self.letters],
        }


@dataclass(frozen=True)
class Bucket:
    """Roots whose first event falls in [start, start + the bucket width), by status, and
    the complete latency of the completed ones."""

    start: datetime
    counts: dict[str, int]
    p50_seconds: float | None = None
    p99_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class Overview:
    """One app's (or every app's) roots by status, by their first event's time.

    `ingested` counts `root_state` rows: every root reconciled at least once, each replay
    attempt a root of its own. `p50_seconds`/`p99_seconds` are the complete latency of the
    `completed` roots (`last_event_at - first_event_at`), approximate (t-digest), over a
    uniform sample of them (one in k, by root id) above `LATENCY_SAMPLE` roots.
    """

    app: str | None
    since: datetime | None
    until: datetime | None
    ingested: int
    counts: dict[str, int]
    p50_seconds: float | None
    p99_seconds: float | None
    bucket_seconds: int
    buckets: list[Bucket] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: jsonable(getattr(self, f.name)) for f in fields(self) if f.name != "buckets"}
        out["buckets"] = [bucket.to_json() for bucket in self.buckets]
        return out


def bucket_width(span: timedelta) -> int:
    """The bucket width, in seconds, for a chart over `span`.

    Example:
        >>> bucket_width(timedelta(hours=2)), bucket_width(timedelta(days=30))
        (300, 86400)
    """
    seconds = span.total_seconds()
    for width in BUCKET_SECONDS:
        if seconds / width <= MAX_BUCKETS:
            return width
    return BUCKET_SECONDS[-1]
