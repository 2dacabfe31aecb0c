"""A ledger with dead letters and the output tables their trees wrote to, all written by
delta-rs on disk: for the effects and retract tests (no JVM).

The app `orders` declares four outputs:
- `words` (written through `write_batch`: origin column `origin_root_id`),
- `counts` (a sink's MERGE target, declared in the settings: origin column `origin`),
- `missing` (declared, never written) and `nocolumn` (a table without the origin column).

Its roots, each three rows in `words` and two in `counts` (the `Failed` numbers):
- 1 and 8: dead letters, nothing in their way;
- 2: completed (not a dead letter);
- 3: dead-lettered, but attempt 4 of its message completed (its replay's bookkeeping never
  settled attempt 3);
- 4: dead-lettered, and attempt 2 of its message completed late;
- 5: dead-lettered, and attempt 4 is registered in `roots` (a replay under way);
- 6: dead-lettered, and a replay of it is planned in `replay_log` (not sent yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits.outputs import declare_output
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import REPLAY_LOG, ROOTS
from tests.ledger_fixtures import write_rows
from tests.replay_ledger import T0, Failed, write_failed

DEAD = status.DEAD_LETTERED
ROOTS_OF = {
    "dead": Failed(1, status=DEAD, attempt=3),
    "completed": Failed(2, status=status.COMPLETED),
    "later_completed": Failed(3, status=DEAD, attempt=3),
    "late": Failed(4, status=DEAD, attempt=3),
    "registered": Failed(5, status=DEAD, attempt=3),
    "planned": Failed(6, status=DEAD, attempt=3),
    "other_dead": Failed(8, status=DEAD, attempt=3, changed_at=T0 + timedelta(minutes=1)),
}
# The other attempts of those messages.
ATTEMPTS = [
    Failed(3, status=status.COMPLETED, attempt=4, changed_at=T0 + timedelta(minutes=2)),
    Failed(4, status=status.COMPLETED_LATE, attempt=2),
]
REGISTERED_ONLY = Failed(5, attempt=4, status=status.PENDING)
WORDS_PER_ROOT = 3
COUNTS_PER_ROOT = 2


@dataclass(frozen=True)
class Ledger:
    settings: Settings
    words: str
    counts: str
    missing: str
    nocolumn: str

    def rows(self, path: str, column: str = "origin_root_id") -> dict[int, int]:
        """Rows per origin in the table at `path`."""
        counted: dict[int, int] = {}
        for row in DeltaTable(path).to_pyarrow_table().to_pylist():
            counted[row[column]] = counted.get(row[column], 0) + 1
        return counted


def effects_ledger(tmp_path: Path) -> Ledger:
    """Write the ledger and outputs described above under `tmp_path`."""
    warehouse = str(tmp_path / "warehouse")
    words, counts = f"{warehouse}/words", f"{warehouse}/counts"
    missing, nocolumn = f"{warehouse}/missing", f"{warehouse}/nocolumn"
    settings = load_settings(
        var_dir=tmp_path / "var",
        warehouse=warehouse,
        engine={"kind": "embedded"},
        apps={"orders": {"outputs": [{"path": counts, "origin_column": "origin"}]}},
    )
    write_failed(warehouse, [*ROOTS_OF.values(), *ATTEMPTS])
    r = REGISTERED_ONLY
    write_rows(warehouse, ROOTS, [{
        "root_id": r.root_id, "app": r.app, "attempt": r.attempt, "origin_root_id": r.origin,
        "source": "sqs", "source_queue": "orders-in", "source_message_id": "m-5",
        "source_position": None, "payload": "{}", "ingested_at": T0 + timedelta(minutes=3),
    }])  # fmt: skip
    p = ROOTS_OF["planned"]
    write_rows(warehouse, REPLAY_LOG, [planned_replay(p)])
    origins = sorted({f.origin for f in [*ROOTS_OF.values(), *ATTEMPTS]})
    write_deltalake(words, pa.table({
        "origin_root_id": pa.array([o for o in origins for _ in range(WORDS_PER_ROOT)], pa.int64()),
        "position": pa.array([i for _ in origins for i in range(WORDS_PER_ROOT)], pa.int32()),
        "word": [f"w{o % 97}-{i}" for o in origins for i in range(WORDS_PER_ROOT)],
    }))  # fmt: skip
    write_deltalake(counts, pa.table({
        "origin": pa.array([o for o in origins for _ in range(COUNTS_PER_ROOT)], pa.int64()),
        "word": [f"w{i}" for _ in origins for i in range(COUNTS_PER_ROOT)],
        "n": pa.array([1] * len(origins) * COUNTS_PER_ROOT, pa.int64()),
    }))  # fmt: skip
    write_deltalake(nocolumn, pa.table({"word": ["a"], "n": [1]}))
    for path in (words, missing, nocolumn):
        declare_output(warehouse, "orders", path, declared_by="write_batch")
    return Ledger(settings, words, counts, missing, nocolumn)


def planned_replay(root: Failed) -> dict[str, Any]:
    return {
        "replay_id": "r-1", "event": "planned", "requested_by": "cli:ops", "request": "{}",
        "root_id": root.root_id, "app": root.app, "action": "replay",
        "prior_status": DEAD, "attempt": root.attempt + 1, "origin_root_id": root.origin,
        "new_root_id": 12345, "source": "sqs", "target": "orders-in", "reason": "boom",
        "last_stage": "work", "first_event_date": T0.date(), "dry_run": False,
        "planned_at": T0 + timedelta(minutes=5), "sent_at": None, "message_id": None,
        "error": None,
    }  # fmt: skip
