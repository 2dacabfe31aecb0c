"""Kept tables on the S3 API (issue 55): a writer keeps each table's `DeltaTable` and
brings it up to date (`ackfold.ledger.storage.snapshots`); a table deleted and made anew at its
path is read afresh, not from the old table's snapshot (the soak's S3 run met it: the
older ackfold's `root_state` made anew)."""

from __future__ import annotations

from deltalake import DeltaTable

from ackfold import LedgerWriter, Tracker
from ackfold.ledger.storage.store import storage_options
from ackfold_dev.s3 import LocalS3
from tests.s3.conftest import warehouse_of


def _append(writer: LedgerWriter, n: int) -> None:
    tracker = Tracker("orders", ledger=writer)
    order = tracker.spout(f"order-{n}", source="sqs", source_queue="orders", payload="{}")
    tracker.ack(order, stage="store")
    writer.append(tracker.drain_roots(), tracker.drain())


def test_a_table_made_anew_on_s3_is_not_read_from_the_old_snapshot(
    s3: LocalS3, bucket: str, s3_env: dict[str, str]
) -> None:
    warehouse = warehouse_of(bucket)
    writer = LedgerWriter(warehouse)
    for n in range(2):
        _append(writer, n)
    assert writer.table("roots").version() == 2
    client = s3.client()
    for table in ("roots", "ack_events"):
        listed = client.list_objects_v2(Bucket=bucket, Prefix=f"warehouse/{table}/")
        for found in listed.get("Contents", []):
            client.delete_object(Bucket=bucket, Key=found["Key"])
    fresh = LedgerWriter(warehouse)  # another process makes it anew, and appends
    for n in range(10, 14):
        _append(fresh, n)
    kept = writer.table("roots")
    assert kept.version() == 4
    assert kept.to_pyarrow_table().num_rows == 4  # the new table's files, none of the old
    _append(writer, 20)
    read = DeltaTable(writer.uri("roots"), storage_options=storage_options(warehouse))
    assert (read.version(), read.to_pyarrow_table().num_rows) == (5, 5)
