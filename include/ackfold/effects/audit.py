"""The retract audit log, `retract_log`: who retracted which dead letters' rows, when,
from which outputs, and how many (`ackfold.ledger.tables.RETRACT_LOG_DDL`).

Written ahead, like the replay log: a `planned` row per root and output before the delete,
a `deleted` (or `failed`) row after it. Every append is fenced by the ledger's lease: a
run that lost it writes no row (invariant 19).

Example:
    >>> [r.event for r in retract_history(settings, root_id=42)]   # doctest: +SKIP
    ['planned', 'deleted']
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ackfold.config import Settings

# The events of `retract_log`.
PLANNED: Final = "planned"
DELETED: Final = "deleted"
FAILED: Final = "failed"


@dataclass(frozen=True)
class RetractRecord:
    """One row of `retract_log`. `unconfirmed`: a `planned` row whose retract wrote no
    `deleted` or `failed` row for it (a crash between the log and the delete)."""

    retract_id: str
    event: str
    requested_by: str
    request: str
    root_id: int
    app: str
    origin_root_id: int
    attempt: int | None
    output: str
    origin_column: str
    row_count: int
    sample: str | None
    table_version: int | None
    table_rows: int | None
    logged_at: datetime
    error: str | None
    unconfirmed: bool = False

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        from ackfold.ledger.ids import format_id

        row = asdict(self)
        row["root_id"] = format_id(self.root_id)
        row["origin_root_id"] = format_id(self.origin_root_id)
        row["logged_at"] = self.logged_at.isoformat()
        return row


def retract_history(
    settings: Settings,
    *,
    root_id: int | None = None,
    app: str | None = None,
    limit: int = 100,
) -> list[RetractRecord]:
    """The newest `limit` rows of `retract_log` (of `root_id`, or `app`), newest first;
    [] when the ledger has no retract log yet. A `planned` row that its retract never
    confirmed is marked `unconfirmed`."""
    raise NotImplementedError
