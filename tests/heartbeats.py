"""`app_progress` rows as the heartbeat writes them, for tests that read them without Spark."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from ackfold.ledger.schema.tables import APP_PROGRESS
from ackfold.track.heartbeat import PROGRESS, progress_row
from tests.ledger_fixtures import write_rows


def beat(
    app: str,
    at: datetime,
    batch_id: int | None,
    *,
    event: str = PROGRESS,
    rate: float = 10.0,
    lag: int | None = None,
    exception: str | None = None,
    query: str = "q-1",
) -> dict[str, Any]:
    row = progress_row(
        app,
        query,
        "run-1",
        f"{app}.count",
        batch_id if event == PROGRESS else None,
        at if event == PROGRESS else None,
        event=event,
        input_rows=int(rate),
        input_rate=rate if event == PROGRESS else None,
        processed_rate=rate * 2 if event == PROGRESS else None,
        source_lag=lag,
        exception=exception,
    )
    return {**row, "recorded_at": at}


def write_beats(warehouse: str | Path, rows: list[dict[str, Any]]) -> None:
    write_rows(warehouse, APP_PROGRESS, rows)
