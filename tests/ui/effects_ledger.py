"""A sample ledger whose apps declare outputs, with real Delta output tables on disk: what
the root pages, the failed-roots column and the retract button read.

- `clicks` declares `clicks_out` (origin in `origin_root_id`, 3 rows of the dead letter,
  one of another origin), `clicks_words` (an intermediate table a stage reads: it
  carries `_ackfold`; 2 rows of the dead letter, which a retract leaves) and
  `clicks_gone` (declared, never written: a problem line);
- `orders` declares nothing;
- a `dead_letters` row for the dead letter, so that the dead-letters page lists it;
- `OLDER` more dead-lettered clicks (`older`), each a day older than the last, with no
  rows anywhere: pages of dead letters longer than one.

Each output row carries a `token` column (named like a secret key) and a `note` that
holds a secret the `ui.redact_patterns` of `SECRET_PATTERN` match.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
from fastapi.testclient import TestClient

from ackfold.effects import declare_output
from ackfold.ledger.schema.tables import DEAD_LETTERS, ROOT_STATE
from tests.ledger_fixtures import DAY3, Sample, sample_ledger, write_rows
from tests.ui.conftest import FakeAirflow, make_client, ui_settings

SECRET: Final = "sk-live-0123456789"
SECRET_PATTERN: Final = r"sk-live-\w+"
TOKEN: Final = "tok-abc"
DEAD_ROWS: Final = 3
WORD_ROWS: Final = 2
OLDER: Final = 4


@dataclass
class EffectsLedger:
    sample: Sample
    out: str  # the clicks app's output table
    gone: str  # declared, never written
    words: str  # a table a stage reads
    older: list[int]  # more dead letters, newest first, with no rows

    @property
    def warehouse(self) -> str:
        return self.sample.warehouse


def effects_ledger(base: Path) -> EffectsLedger:
    """The sample ledger under `base`/warehouse, with its outputs beside it."""
    sample = sample_ledger(base / "warehouse")
    out, gone = str(base / "outputs" / "clicks_out"), str(base / "outputs" / "clicks_gone")
    rows: list[dict[str, Any]] = [
        {
            "origin_root_id": sample.dead,
            "position": i,
            "word": f"word{i}",
            "token": TOKEN,
            "note": f"key {SECRET} in the text",
        }
        for i in range(DEAD_ROWS)
    ]
    rows.append(
        {"origin_root_id": sample.timed_out, "position": 0, "word": "other", "token": TOKEN,
         "note": "-"}
    )  # fmt: skip
    write_output(out, rows)
    words = str(base / "outputs" / "clicks_words")
    write_words(words, [(sample.dead, i) for i in range(WORD_ROWS)])
    declare_output(sample.warehouse, "clicks", out)
    declare_output(sample.warehouse, "clicks", gone)
    declare_output(sample.warehouse, "clicks", words)
    write_rows(
        sample.warehouse,
        DEAD_LETTERS,
        [
            {
                "root_id": sample.dead,
                "app": "clicks",
                "origin_root_id": sample.dead,
                "attempt": 1,
                "source": "kafka",
                "source_queue": "clicks",
                "dead_letter_queue": "clicks-dlq",
                "reason": "geo lookup failed",
                "last_stage": "enrich",
                "message_id": "clicks:1:7",
                "dead_lettered_at": DAY3,
            }
        ],
    )
    return EffectsLedger(sample, out, gone, words, older_dead_letters(sample))


def effects_client(
    ledger: EffectsLedger, airflow: FakeAirflow, token: str | None = "jwt-ann", **ui: Any
) -> TestClient:
    """A client of the UI over `ledger` as `token`'s user, the secrets of its outputs
    matched by `ui.redact_patterns` (`SECRET_PATTERN`) unless `ui` says otherwise."""
    ui.setdefault("redact_patterns", [SECRET_PATTERN])
    return make_client(ui_settings(ledger.warehouse, **ui), airflow, token=token)


def older_dead_letters(sample: Sample) -> list[int]:
    """`OLDER` copies of the dead letter's `root_state` row, a day older each: their ids."""
    from datetime import timedelta

    from deltalake import DeltaTable

    table = DeltaTable(f"{sample.warehouse}/{ROOT_STATE}").to_pyarrow_table()
    (dead,) = [row for row in table.to_pylist() if row["root_id"] == sample.dead]
    rows = []
    for i in range(1, OLDER + 1):
        shift = timedelta(days=i)
        root_id = sample.dead + i
        rows.append(
            dead
            | {
                "root_id": root_id,
                "origin_root_id": root_id,
                "first_event_at": dead["first_event_at"] - shift,
                "last_event_at": dead["last_event_at"] - shift,
                "status_changed_at": dead["status_changed_at"] - shift,
                "first_event_date": dead["first_event_date"] - shift,
            }
        )
    write_rows(sample.warehouse, ROOT_STATE, rows)
    return [row["root_id"] for row in rows]


def write_output(path: str, rows: list[dict[str, Any]]) -> None:
    """An app's output table as delta-rs writes it (one commit)."""
    from deltalake import write_deltalake

    schema = pa.schema(
        [
            ("origin_root_id", pa.int64()),
            ("position", pa.int32()),
            ("word", pa.string()),
            ("token", pa.string()),
            ("note", pa.string()),
        ]
    )
    write_deltalake(path, pa.Table.from_pylist(rows, schema), mode="append")


def write_words(path: str, rows: list[tuple[int, int]]) -> None:
    """An intermediate table, as `write_batch` writes one that a stage reads: its rows
    carry the tuple column `_ackfold`."""
    from deltalake import write_deltalake

    table = pa.table(
        {
            "origin_root_id": pa.array([origin for origin, _ in rows], pa.int64()),
            "position": pa.array([position for _, position in rows], pa.int32()),
            "_ackfold": pa.array([7 * position for _, position in rows], pa.int64()),
        }
    )
    write_deltalake(path, table, mode="append")


def output_rows(path: str, origin: int) -> int:
    """How many rows of `origin` the output at `path` holds now."""
    from deltalake import DeltaTable

    table = DeltaTable(path).to_pyarrow_table()
    return sum(1 for value in table.column("origin_root_id").to_pylist() if value == origin)
