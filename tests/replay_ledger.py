"""Ledgers of roots to replay, written by delta-rs with the real tables' schemas: the rows
`root_state` and `roots` hold for failed, timed-out and dead-lettered roots, as a reconcile
and a spout leave them. Shared by the embedded replay tests, the engines' conformance test
and the queue tiers' replay tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ackfold.config import Settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema import ids, status
from ackfold.ledger.schema.tables import ROOT_STATE, ROOTS
from tests.ledger_fixtures import write_rows

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Failed:
    """One root to write: its app, status, attempt, when its status changed, and where it
    came from (SQS with its payload; Kafka at `position`, no payload)."""

    n: int
    app: str = "orders"
    status: str = status.FAILED
    attempt: int = 1
    changed_at: datetime = T0
    source: str = "sqs"
    queue: str = "orders-in"
    payload: str | None = "default"
    position: str | None = None
    registered: bool = True  # a `roots` row (else: no payload to send)
    first_event_at: datetime | None = None

    @property
    def root_id(self) -> int:
        return ids.hash64("replay-test", self.app, self.n, self.attempt)

    @property
    def origin(self) -> int:
        return ids.hash64("replay-test", self.app, self.n, 1)


def write_failed(warehouse: str | Path, roots: Sequence[Failed]) -> list[int]:
    """Write `roots` to `root_state` (and `roots`), one commit per table; the other
    tables a replay needs are created empty. Returns the root ids, in order."""
    LedgerWriter(str(warehouse)).create()
    state: list[dict[str, Any]] = []
    registered: list[dict[str, Any]] = []
    for r in roots:
        first = r.first_event_at or r.changed_at - timedelta(minutes=5)
        payload = f'{{"n": {r.n}}}' if r.payload == "default" else r.payload
        state.append(
            {
                "root_id": r.root_id, "app": r.app, "status": r.status, "xor_acc": 7,
                "event_count": 2, "first_event_at": first, "last_event_at": first,
                "status_changed_at": r.changed_at, "attempt": r.attempt,
                "origin_root_id": r.origin, "last_stage": "work",
                "fail_reason": "boom" if r.status != status.TIMED_OUT else None,
                "fail_stage": "work" if r.status != status.TIMED_OUT else None,
                "fail_at": first, "init_seen": True, "seen_event_hashes": [],
                "reconciled_at": r.changed_at, "first_event_date": first.date(),
            }
        )  # fmt: skip
        if r.registered:
            registered.append(
                {
                    "root_id": r.root_id, "app": r.app, "attempt": r.attempt,
                    "origin_root_id": r.origin, "source": r.source, "source_queue": r.queue,
                    "source_message_id": f"m-{r.n}", "source_position": r.position,
                    "payload": None if r.source == "kafka" and r.position else payload,
                    "ingested_at": first,
                }
            )  # fmt: skip
    if state:
        write_rows(warehouse, ROOT_STATE, state)
    if registered:
        write_rows(warehouse, ROOTS, registered)
    return [r.root_id for r in roots]


def read_table(warehouse: str | Path, table: str) -> list[dict[str, Any]]:
    """Every row of a ledger table, read by delta-rs."""
    from deltalake import DeltaTable

    rows: list[dict[str, Any]] = DeltaTable(f"{warehouse}/{table}").to_pyarrow_table().to_pylist()
    return rows


def statuses(warehouse: str | Path) -> dict[int, str]:
    """Each root's status in `root_state`."""
    return {row["root_id"]: row["status"] for row in read_table(warehouse, ROOT_STATE)}


def files_orders(settings: Settings) -> tuple[int, int, datetime]:
    """The README's app on `settings`' ledger: two orders read from a folder of files
    (`source="files"`, which has no sender), an hour ago; one completed, one failed, and
    reconciled. Returns the completed root, the failed one, and the reconcile's time."""
    from ackfold.runs.reconcile import run_reconcile
    from ackfold.track.tracker import Tracker

    t0 = datetime.now(UTC) - timedelta(hours=1)
    tracker = Tracker("orders", clock=lambda: t0)
    good = tracker.spout("o-1", source="files", source_queue="/inbox")
    tracker.ack(good, stage="store")
    bad = tracker.spout("o-2", source="files", source_queue="/inbox")
    tracker.fail(bad, stage="store", reason="no quantity")
    LedgerWriter(settings.table_root).append(tracker.drain_roots(), tracker.drain())
    now = datetime.now(UTC)  # statuses change at wall-clock times: the backoff counts from them
    run_reconcile(settings, now=now, engine="embedded")
    return good.roots[0], bad.roots[0], now
