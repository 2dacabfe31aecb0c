"""The Reliability UI on a free loopback port for the browser tier, without Airflow: the
UI tier's stand-in login (`tests.ui.conftest.viewer`, a `_token` cookie), a real uvicorn
server in a thread; and a busy ledger to look at (many roots, long reasons, dead
letters, a quality run of many checks)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ackfold.config import Settings
from ackfold.ledger.schema import status
from ackfold.ledger.schema.operational import QUALITY_RESULTS_DDL
from ackfold.ledger.schema.tables import (
    DEAD_LETTERS,
    QUALITY_RESULTS,
    column_names,
)
from ackfold.quality import CheckResult, QualityReport
from ackfold_dev.ports import free_port
from tests.ledger_fixtures import bulk_ledger, write_rows
from tests.ui.conftest import SECRET, viewer

LONG_REASON = (
    "java.lang.IllegalStateException: the enrich stage could not parse field 'amount' of "
    "record 1234 (value '12,5 EUR' is not a decimal); the record was failed explicitly and "
    "its root will be replayed until max_attempts, then dead-lettered with this reason"
)


@contextmanager
def serve_ui(settings: Settings, **options: Any) -> Iterator[str]:
    """The UI app over `settings` at http://127.0.0.1:<free port>, stopped on exit."""
    import uvicorn

    from ackfold.ui.app import create_app

    app = create_app(settings, viewer=viewer, csrf_secret=SECRET, **options)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive(), "the UI server stopped at start"
        assert time.monotonic() < deadline, "the UI did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def busy_ledger(warehouse: Path) -> None:
    """Roots in every status over two apps (60 a day for 3 days), 60 dead letters with
    long reasons (some redriven), and a quality run of 69 checks with long descriptions."""
    cycle = (status.FAILED, status.TIMED_OUT, status.DEAD_LETTERED, status.REPLAYED)
    bulk_ledger(
        warehouse,
        roots_per_day=60,
        days=3,
        start=datetime(2026, 11, 20, tzinfo=UTC),
        statuses=lambda i: cycle[i % 4] if i % 5 else status.COMPLETED,
    )
    at = datetime(2026, 11, 22, 9, tzinfo=UTC)
    letters = [
        {
            "root_id": 10_000 + i,
            "app": ("orders", "clicks")[i % 2],
            "origin_root_id": 10_000 + i,
            "attempt": 5,
            "source": "sqs",
            "source_queue": "orders-in",
            "dead_letter_queue": "orders-in-dlq",
            "reason": LONG_REASON if i % 3 else "poison",
            "last_stage": "enrich",
            "message_id": f"m-{i}",
            "dead_lettered_at": at + timedelta(minutes=i),
            "redriven_at": at + timedelta(hours=2) if i % 4 == 0 else None,
            "redrive_root_id": 9_000_000_000_000_000_000 + i if i % 4 == 0 else None,
        }
        for i in range(60)
    ]
    write_rows(warehouse, DEAD_LETTERS, letters)
    results = tuple(
        CheckResult(
            suite=f"delivery.app{i % 7}.checks",
            app=f"app{i % 7}",
            check=f"check_number_{i}",
            expectation="expect_column_values_to_be_in_set",
            description=(
                f"app{i % 7}: every root older than its timeout plus grace is settled "
                "(completed, replayed or dead-lettered), wherever it sits in time"
            ),
            success=i % 9 != 0,
            observed=f"{i % 3} of {1000 + i} rows",
            element_count=1000 + i,
            unexpected_count=i % 3,
            sample=("root_id=0x00000000000004d2, outcome=failed",) if i % 9 == 0 else (),
        )
        for i in range(69)
    )
    report = QualityReport("run-1", at, at - timedelta(days=2), results)
    columns = column_names(QUALITY_RESULTS_DDL)
    write_rows(
        warehouse, QUALITY_RESULTS, [dict(zip(columns, row, strict=True)) for row in report.rows()]
    )


# The longest names and descriptions of the real suites (`ackfold.quality.expectations`),
# written out: building the suites imports Great Expectations, 12 CPU-seconds.
REAL_CHECKS = (
    ("delivery.orders.overdue_roots", "no_lost_roots", "orders: no lost roots: every root "
     "registered over 1200 s ago (timeout plus grace) is completed, replayed (its next "
     "attempt registered) or dead-lettered"),
    ("delivery.orders.sent_messages", "sent_registered", "orders: every message its "
     "producer reports as sent is registered as a root"),
    ("ledger.root_state", "not_null.status_changed_at", "root_state.status_changed_at is "
     "never null"),
    ("ledger.roots", "type.source_message_id", "roots.source_message_id is STRING"),
    ("ledger.root_state", "columns", "root_state has the contract's columns: root_id, app, "
     "status, xor_acc, event_count, first_event_at, last_event_at, status_changed_at, "
     "attempt, origin_root_id, last_stage, fail_reason"),
)  # fmt: skip


def passing_quality_run(warehouse: Path, checks: int = 60) -> int:
    """A quality run of `checks` checks with the real suites' names and descriptions
    (`REAL_CHECKS`), every one passed: no example to show. Returns `checks`."""
    at = datetime(2026, 11, 22, 9, tzinfo=UTC)
    results = tuple(
        CheckResult(
            suite=suite,
            app="orders" if suite.startswith("delivery.") else None,
            check=check,
            expectation="expect_column_values_to_not_be_null",
            description=description,
            success=True,
            observed=f"0 of {1000 + i} rows",
            element_count=1000 + i,
            unexpected_count=0,
        )
        for i in range(checks)
        for suite, check, description in [REAL_CHECKS[i % len(REAL_CHECKS)]]
    )
    report = QualityReport("run-passing", at, at - timedelta(days=2), results)
    columns = column_names(QUALITY_RESULTS_DDL)
    write_rows(
        warehouse, QUALITY_RESULTS, [dict(zip(columns, row, strict=True)) for row in report.rows()]
    )
    return checks
