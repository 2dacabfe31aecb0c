"""Maintenance on an object store is delta-rs's, while a producer goes on appending: the
settled roots' old events go, the rest stays, compaction and VACUUM commit, and not one
concurrent append is lost."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ackfold import LedgerWriter, Tracker
from ackfold.config import load_settings
from ackfold.ledger.schema.contract import arrow_schema
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, ROOTS
from ackfold.ledger.storage.store import delta_uri, storage_options
from ackfold.maintenance import run_maintenance
from tests.s3.conftest import warehouse_of


def _table(uri: str) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(delta_uri(uri), storage_options=storage_options(uri))


def _state_row(root_id: int, app: str, status: str, at: datetime) -> dict[str, Any]:
    return {name: None for name in arrow_schema(ROOT_STATE).names} | {
        "root_id": root_id, "app": app, "status": status, "xor_acc": 0, "event_count": 2,
        "first_event_at": at, "last_event_at": at, "status_changed_at": at,
        "last_stage": "store", "init_seen": True, "seen_event_hashes": [],
        "reconciled_at": at, "first_event_date": at.date(),
    }  # fmt: skip


def test_maintenance_on_s3_is_delta_rs_and_loses_no_append(
    tmp_path: Path, bucket: str, s3_env: dict[str, str]
) -> None:
    import pyarrow as pa

    warehouse = warehouse_of(bucket, "s3a")
    settings = load_settings(var_dir=tmp_path, warehouse=warehouse)
    writer = LedgerWriter(warehouse)
    tracker = Tracker("orders")
    roots = [tracker.spout(f"o-{i}", source="sqs", source_queue="q") for i in range(4)]
    for root in roots:
        tracker.ack(root, stage="store")
    # Forty days ago: older than the retention (30 days), as settled history is.
    at = datetime.now(UTC) - timedelta(days=40)
    old = [{**event, "event_time": at} for event in tracker.drain()]
    writer.append(tracker.drain_roots(), old)
    states = [
        _state_row(roots[0].roots[0], "orders", "completed", at),
        _state_row(roots[1].roots[0], "orders", "completed_late", at),
        _state_row(roots[2].roots[0], "orders", "failed", at),  # kept: may be replayed
        _state_row(roots[3].roots[0], "orders", "pending", at),
    ]
    writer.append_arrow(ROOT_STATE, pa.Table.from_pylist(states, schema=arrow_schema(ROOT_STATE)))

    # A producer appends all along: each of its batches must be there at the end.
    stop, appended, errors = threading.Event(), [0], []

    def produce() -> None:
        mine, n = LedgerWriter(warehouse), 0
        try:
            while not stop.is_set() or n < 3:
                t = Tracker("live")
                t.ack(t.spout(f"live-{n}", source="sqs", source_queue="q"), stage="s")
                mine.append(t.drain_roots(), t.drain())
                appended[0] += 1
                n += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        summary = run_maintenance(settings, engine="embedded")
    finally:
        stop.set()
        producer.join()
    assert errors == []
    assert summary["protocol"] == "delta-rs"
    assert summary["roots_expired"] == 2
    assert summary["events_deleted"] == 4  # init and ack of each settled root
    events = _table(f"{warehouse}/{ACK_EVENTS}").to_pyarrow_table()
    kept = set(events.column("root_id").to_pylist())
    assert roots[0].roots[0] not in kept
    assert roots[1].roots[0] not in kept
    assert {roots[2].roots[0], roots[3].roots[0]} <= kept
    live = _table(f"{warehouse}/{ROOTS}").to_pyarrow_table().filter(
        pa.compute.equal(pa.compute.field("app"), "live")  # type: ignore[attr-defined]
    )  # fmt: skip
    assert live.num_rows == appended[0]
    operations = [c["operation"] for c in _table(f"{warehouse}/{ACK_EVENTS}").history()]
    assert "MERGE" in operations
    assert "OPTIMIZE" in operations
    # VACUUM found no file unreferenced for 7 days (it commits only when it deletes),
    # after making the table say how long it keeps them.
    config = _table(f"{warehouse}/{ACK_EVENTS}").metadata().configuration
    assert config["delta.deletedFileRetentionDuration"] == "interval 168 hours"
    assert summary["vacuumed"][0] == ACK_EVENTS
    assert _table(f"{warehouse}/{ACK_EVENTS}").protocol().min_reader_version == 1
