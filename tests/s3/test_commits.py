"""Every ledger commit path on an object store is delta-rs's conditional create, on a real
S3 API: LedgerWriter (producers, the driver's rows of a tracked app, replay_log,
sent_messages, alert_log), `ackfold init`, the ledger lease; and the read path of the CLI.
Plain Python: no JVM."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from ackfold import LedgerWriter
from ackfold.ledger.commits.driver_writers import driver_writer
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.commits.lock import LedgerBusy
from ackfold.ledger.errors import MissingDeltaRs
from ackfold.ledger.reading.sql import SqlReader
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ALERT_LOG,
    REPLAY_LOG,
    ROOTS,
    SENT_MESSAGES,
    TABLES,
    Ledger,
)
from ackfold.ledger.setup.create import create_tables
from ackfold_dev.s3 import LocalS3
from tests.racing_writers import producer_rows, table_rows
from tests.s3.conftest import warehouse_of


def _log_puts(s3: LocalS3, bucket: str) -> list[dict[str, Any]]:
    """The server's journal of the commits (PUTs of `_delta_log/<version>.json`) to `bucket`."""
    assert s3.journal is not None
    puts = []
    for line in s3.journal.read_text().splitlines():
        record = json.loads(line)
        path = record["path"]
        if path.startswith(f"/{bucket}/") and "/_delta_log/" in path and path.endswith(".json"):
            puts.append(record)
    return puts


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_ledger_writer_commits_by_conditional_create(
    s3: LocalS3, bucket: str, s3_env: dict[str, str], scheme: str
) -> None:
    """An `s3a://` warehouse (Spark's spelling) is the same objects as `s3://`: both get
    the rows, and every commit file was created with `If-None-Match: *`."""
    warehouse = warehouse_of(bucket, scheme)
    writer = LedgerWriter(warehouse)
    assert writer.storage_options is not None
    assert writer.storage_options["AWS_ENDPOINT"] == s3.endpoint_url
    roots, events = producer_rows(5)
    assert writer.append(roots, events, app_id="p", version=1).roots == 5
    assert writer.append(roots, events, app_id="p", version=1).skipped == (ROOTS, ACK_EVENTS)
    assert table_rows(f"{warehouse}/{ROOTS}") == 5
    assert table_rows(f"s3://{bucket}/warehouse/{ACK_EVENTS}") == 10
    puts = _log_puts(s3, bucket)
    assert len(puts) == 4  # each table: create, one append (the retry wrote nothing)
    assert all(p["headers"].get("HTTP_IF_NONE_MATCH") == "*" for p in puts), puts


def test_init_creates_every_table_on_s3a(
    bucket: str, s3_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from ackfold.cli.main import run

    warehouse = warehouse_of(bucket, "s3a")
    assert run(["init", "--warehouse", warehouse]) == 0
    out = capsys.readouterr().out
    assert out.count("created ") == len(TABLES), out
    assert run(["init", "--warehouse", warehouse]) == 0
    assert capsys.readouterr().out.count("exists ") == len(TABLES)


def test_the_lease_is_a_compare_and_swap_on_s3(bucket: str, s3_env: dict[str, str]) -> None:
    warehouse = warehouse_of(bucket, "s3a")
    first, second = LedgerLease(warehouse, host="a"), LedgerLease(warehouse, host="b")
    with first.held("reconcile"):
        assert (first.holder() or "").startswith("reconcile on a")
        with pytest.raises(LedgerBusy, match="reconcile on a"), second.held("replay", wait=0):
            pass
    with second.held("replay"):
        assert (first.holder() or "").startswith("replay on b")
    assert first.holder() is None


def test_driver_rows_replay_log_sent_and_alerts_go_through_delta_rs(
    bucket: str, s3_env: dict[str, str]
) -> None:
    """On an object store `driver_writer` is the delta-rs writer whatever the session (no
    Spark is asked); the tables that Spark appended to elsewhere are appended here."""
    import pyarrow as pa

    from ackfold.ledger.schema.contract import arrow_schema
    from ackfold.sources.sent import record_sent

    ledger = Ledger(warehouse_of(bucket, "s3a"))
    writer = driver_writer(None, ledger)  # type: ignore[arg-type]
    assert isinstance(writer, LedgerWriter)
    now = datetime.now(UTC)
    log = {name: None for name in arrow_schema(REPLAY_LOG).names} | {
        "replay_id": "r1", "event": "planned", "requested_by": "test", "request": "{}",
        "root_id": 7, "app": "orders", "action": "replay", "prior_status": "failed",
        "attempt": 2, "origin_root_id": 7, "source": "sqs", "target": "orders",
        "first_event_date": now.date(), "dry_run": False, "planned_at": now,
    }  # fmt: skip
    writer.append_arrow(REPLAY_LOG, pa.Table.from_pylist([log], schema=arrow_schema(REPLAY_LOG)))
    record_sent(None, ledger, app="orders", source="sqs", source_queue="orders",  # type: ignore[arg-type]
                message_ids=["m1", "m2"])  # fmt: skip
    alert = {name: None for name in arrow_schema(ALERT_LOG).names} | {
        "app": "orders", "rule": "failed", "channel": "log", "event": "opened", "value": "1",
        "threshold": "0", "root_ids": [7], "opened_at": now, "event_at": now,
    }  # fmt: skip
    writer.append_arrow(ALERT_LOG, pa.Table.from_pylist([alert], schema=arrow_schema(ALERT_LOG)))
    assert table_rows(ledger.path(REPLAY_LOG)) == 1
    assert table_rows(ledger.path(SENT_MESSAGES)) == 2
    assert table_rows(ledger.path(ALERT_LOG)) == 1


def test_a_worker_without_deltalake_is_refused_naming_it(
    bucket: str, s3_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spark Connect server's Python worker that cannot import deltalake must not fall
    back to a Spark commit on the object store: it stops, saying what to install."""
    monkeypatch.setitem(sys.modules, "deltalake", None)
    ledger = Ledger(f"s3a://{bucket}/elsewhere")
    with pytest.raises(MissingDeltaRs, match=r"install deltalake==1\.6\.6.*PYSPARK_PYTHON"):
        driver_writer(None, ledger)  # type: ignore[arg-type]


def test_the_cli_read_path_reads_s3a(bucket: str, s3_env: dict[str, str]) -> None:
    warehouse = warehouse_of(bucket, "s3a")
    roots, events = producer_rows(3)
    LedgerWriter(warehouse).append(roots, events)
    reader = SqlReader(warehouse)
    rows = reader.query(ROOTS, ["count(*) AS n"], required=True)
    assert rows == [{"n": 3}]


def test_quality_results_replace_where_and_ledger_create_go_through_delta_rs(
    s3: LocalS3, bucket: str, s3_env: dict[str, str]
) -> None:
    """`quality_results` is replaced run by run (Delta's replaceWhere, in delta-rs), and
    `Ledger.create`, which Spark runs elsewhere, creates the tables by delta-rs here: each
    commit a conditional create."""
    import pyarrow as pa

    from ackfold.ledger.schema.contract import arrow_schema
    from ackfold.ledger.schema.tables import QUALITY_RESULTS, ROOT_STATE

    ledger = Ledger(warehouse_of(bucket, "s3a"))
    create_tables(None, ledger, (ROOT_STATE, QUALITY_RESULTS))  # type: ignore[arg-type]
    assert table_rows(ledger.path(ROOT_STATE)) == 0
    now = datetime.now(UTC)
    schema = arrow_schema(QUALITY_RESULTS)

    def results(run_id: str, checks: int) -> pa.Table:
        rows = [
            {name: None for name in schema.names} | {
                "run_id": run_id, "run_at": now, "window_start": now, "scope": "all apps",
                "suite": "ledger", "check_name": f"c{i}", "expectation": "e",
                "description": "d", "success": True, "observed": "ok",
            }
            for i in range(checks)
        ]  # fmt: skip
        return pa.Table.from_pylist(rows, schema=schema)

    writer = driver_writer(None, ledger)  # type: ignore[arg-type]
    assert writer is not None
    assert writer.table(ROOT_STATE).version() == 0  # what a MERGE by delta-rs would start from
    writer.replace_where(QUALITY_RESULTS, results("run-1", 3), "run_id = 'run-1'")
    writer.replace_where(QUALITY_RESULTS, results("run-2", 2), "run_id = 'run-2'")
    writer.replace_where(QUALITY_RESULTS, results("run-1", 4), "run_id = 'run-1'")  # again
    assert table_rows(ledger.path(QUALITY_RESULTS)) == 6
    puts = [p for p in _log_puts(s3, bucket) if "/quality_results/" in p["path"]]
    assert len(puts) == 4
    assert all(p["headers"].get("HTTP_IF_NONE_MATCH") == "*" for p in puts)
