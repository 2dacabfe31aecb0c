"""A one-root ledger written row by row, with whatever app name, stage name and reasons a
test needs: markup, secrets. (`Tracker` refuses such names; a ledger written by another
producer, or a corrupted one, can still hold them.)

The root failed at `stage` with `reason`: an init at `spout`, a fail event with
`event_reason`, its `root_state` row (status `failed`) and a `dead_letters` row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ackfold.ledger.schema import ids, status
from ackfold.ledger.schema.ids import event_hash
from ackfold.ledger.schema.tables import ACK_EVENTS, DEAD_LETTERS, ROOT_STATE, ROOTS
from tests.ledger_fixtures import write_rows

AT = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class OddRoot:
    warehouse: Path
    root_id: int
    app: str


def odd_ledger(
    warehouse: Path, *, app: str, stage: str, reason: str, event_reason: str | None = None
) -> OddRoot:
    root = ids.hash64("odd", app, stage)
    value = ids.hash64("odd-tuple", root)
    failed = AT + timedelta(seconds=3)
    init = ids.event_id(app, root, "init", "spout", value)
    fail = ids.event_id(app, root, "fail", stage, value)
    write_rows(
        warehouse,
        ROOTS,
        [
            {
                "root_id": root,
                "app": app,
                "attempt": 1,
                "origin_root_id": root,
                "source": "sqs",
                "source_queue": "in",
                "source_message_id": "m-1",
                "payload": '{"n": 1}',
                "ingested_at": AT,
            }
        ],
    )
    event = {"app": app, "root_id": root, "ack_val": value}
    write_rows(
        warehouse,
        ACK_EVENTS,
        [
            {**event, "event_id": init, "kind": "init", "stage": "spout", "event_time": AT},
            {
                **event,
                "event_id": fail,
                "kind": "fail",
                "stage": stage,
                "event_time": failed,
                "reason": reason if event_reason is None else event_reason,
            },
        ],
    )
    write_rows(
        warehouse,
        ROOT_STATE,
        [
            {
                "root_id": root,
                "app": app,
                "status": status.FAILED,
                "xor_acc": value,
                "event_count": 2,
                "first_event_at": AT,
                "last_event_at": failed,
                "status_changed_at": failed,
                "attempt": 1,
                "origin_root_id": root,
                "last_stage": stage,
                "fail_reason": reason,
                "fail_stage": stage,
                "fail_at": failed,
                "init_seen": True,
                "seen_event_hashes": [event_hash(init), event_hash(fail)],
                "reconciled_at": failed + timedelta(minutes=1),
                "first_event_date": AT.date(),
            }
        ],
    )
    write_rows(
        warehouse,
        DEAD_LETTERS,
        [
            {
                "root_id": root,
                "app": app,
                "origin_root_id": root,
                "attempt": 1,
                "source": "sqs",
                "source_queue": "in",
                "dead_letter_queue": "in-dlq",
                "reason": reason,
                "last_stage": stage,
                "message_id": "m-1",
                "dead_lettered_at": failed + timedelta(minutes=2),
            }
        ],
    )
    return OddRoot(warehouse, root, app)
