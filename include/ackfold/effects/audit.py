"""The retract audit log, `retract_log`: who retracted which dead letters' rows, when,
from which outputs, and how many (`ackfold.ledger.schema.operational.RETRACT_LOG_DDL`).

Written ahead, like the replay log: a `planned` row per root and output before the delete,
a `deleted` (or `failed`) row after it. Every append is fenced by the ledger's lease: a
run that lost it writes no row (invariant 19).

Example:
    >>> [r.event for r in retract_history(settings, root_id=42)]   # doctest: +SKIP
    ['planned', 'deleted']
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ackfold.config import Settings
    from ackfold.effects.plans import RetractPlan
    from ackfold.ledger.commits.outputs import DeclaredOutput

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

        from ackfold.ledger.schema.ids import format_id

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
    from ackfold.ledger.reading.reader import LedgerReader
    from ackfold.ledger.schema.tables import RETRACT_LOG

    where = [f"root_id = {int(root_id)}"] if root_id is not None else []
    rows = LedgerReader(settings.table_root).query(RETRACT_LOG, _COLUMNS, where)
    if app is not None:
        rows = [row for row in rows if row["app"] == app]
    confirmed = {
        (r["retract_id"], r["root_id"], r["output"]) for r in rows if r["event"] != PLANNED
    }
    rows.sort(key=lambda r: (r["logged_at"], r["event"] != PLANNED), reverse=True)
    return [
        RetractRecord(
            **row,
            unconfirmed=row["event"] == PLANNED
            and (row["retract_id"], row["root_id"], row["output"]) not in confirmed,
        )
        for row in rows[:limit]
    ]


def log_rows(settings: Settings, rows: list[dict[str, Any]]) -> None:
    """Append `rows` (dicts of `retract_log`'s columns) in one commit fenced by this
    thread's lease (`LedgerWriter.append_fenced`): a run that lost it appends nothing;
    `Unfenced` outside a turn."""
    import pyarrow as pa

    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.ledger.schema.contract import arrow_schema
    from ackfold.ledger.schema.tables import RETRACT_LOG

    if not rows:
        return
    table = pa.Table.from_pylist(rows, schema=arrow_schema(RETRACT_LOG))
    LedgerWriter(settings.table_root).append_fenced(RETRACT_LOG, table)


def plan_rows(
    plan: RetractPlan,
    event: str,
    targets: dict[str, DeclaredOutput],
    *,
    version: int | None = None,
    total: int | None = None,
    error: str | None = None,
) -> list[dict[str, Any]]:
    """The `retract_log` rows of `event` for each root of `plan` with rows in `targets`
    (output location -> declaration): `version` and `total`, the delete's commit and its
    deleted rows (`deleted` rows); `error`, why it failed (`failed` rows)."""
    now = datetime.now(UTC)
    described = plan.request.describe()
    rows = []
    for root in plan.roots:
        for o in root.outputs:
            if o.output.output not in targets or not o.rows:
                continue
            rows.append(
                {
                    "retract_id": plan.retract_id,
                    "event": event,
                    "requested_by": plan.request.requested_by,
                    "request": described,
                    "root_id": root.root.root_id,
                    "app": root.root.app,
                    "origin_root_id": root.root.origin_root_id,
                    "attempt": root.root.attempt,
                    "output": o.output.output,
                    "origin_column": o.output.origin_column,
                    "row_count": o.rows,
                    "sample": json.dumps(list(o.sample)) if event == PLANNED else None,
                    "table_version": version,
                    "table_rows": total,
                    "logged_at": now,
                    "error": error,
                }
            )
    return rows


_COLUMNS: Final = tuple(f for f in RetractRecord.__dataclass_fields__ if f != "unconfirmed")
