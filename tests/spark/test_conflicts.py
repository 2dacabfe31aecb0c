"""Real Delta conflicts between two writers of one ledger table, in the tier's Spark
session: each ledger writer retries the commit it lost, writes once, and says so.

The conflict is made, not hoped for: a Python UDF in the first writer's data runs while
its transaction is open, lets the second writer commit, and waits for it to finish; the
first writer's commit then meets a newer version it did not read."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Column, DataFrame, SparkSession

from ackfold.config import load_settings
from ackfold.ledger.commits.lease import ledger_turn
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ROOT_STATE,
    ROOT_STATE_DDL,
    Ledger,
    spark_schema,
)
from ackfold.ledger.setup.create import create_tables
from ackfold.reconcile.state import append_new, merge_updates
from ackfold.track import write
from ackfold.track.stage import StageTracker
from tests.conftest import JARS_DIR

DAY = date(2026, 11, 20)
AT = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


@contextmanager
def meanwhile(
    tmp_path: Path, other_writer: Callable[[], None]
) -> Iterator[Callable[[Column], Column]]:
    """Yields `hold`, which wraps a column of the first writer's data: the first time
    a row of it is computed, `other_writer` commits (in a driver thread) before it goes on."""
    from pyspark.sql import functions as F

    go, done = tmp_path / "go", tmp_path / "done"
    failures: list[BaseException] = []

    def second() -> None:
        try:
            deadline = time.monotonic() + 120
            while not go.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("the first writer never reached its data")
                time.sleep(0.05)
            other_writer()
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)
        finally:
            done.touch()

    def held(value: Any) -> Any:
        if not done.exists():
            go.touch()
            deadline = time.monotonic() + 120
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return value

    thread = threading.Thread(target=second, daemon=True)
    thread.start()
    hold_udf = F.udf(lambda value: held(value), "string")  # no hints: a plain row UDF
    yield lambda column: hold_udf(column)
    thread.join(timeout=120)
    assert not failures, f"the second writer failed: {failures[0]!r}"
    assert done.exists()


def state_rows(spark: SparkSession, *rows: dict[str, Any], prior: bool = False) -> DataFrame:
    """root_state rows (the columns not given: a pending root's), with the prior
    partition columns a reconcile's MERGE source carries if `prior`."""
    defaults = {
        "xor_acc": 5, "event_count": 1, "first_event_at": AT, "last_event_at": AT,
        "status_changed_at": AT, "attempt": 1, "origin_root_id": None, "last_stage": "spout",
        "fail_reason": None, "fail_stage": None, "fail_at": None, "init_seen": True,
        "seen_event_hashes": [1], "reconciled_at": AT, "first_event_date": DAY,
    }  # fmt: skip
    schema = spark_schema(ROOT_STATE)
    names = [line.split()[0] for line in ROOT_STATE_DDL.strip().splitlines()]
    full = [{**defaults, "origin_root_id": r["root_id"], **r} for r in rows]
    frame = spark.createDataFrame([tuple(r[n] for n in names) for r in full], schema)
    if prior:
        from pyspark.sql import functions as F

        frame = frame.withColumn("prior_date", F.lit(DAY)).withColumn(
            "prior_status", F.lit(status.PENDING)
        )
    return frame


def test_a_reconcile_merge_that_loses_to_a_concurrent_append_is_retried_and_both_land(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Root 1 is pending; a reconcile MERGEs it to completed while another writer
    appends root 2 into the same partition (first_event_date, pending)."""
    ledger = Ledger(str(tmp_path / "warehouse"))
    settings = load_settings(warehouse=ledger.root, var_dir=tmp_path, jars_dir=JARS_DIR)
    create_tables(spark, ledger, (ROOT_STATE,))
    path = ledger.path(ROOT_STATE)
    completed = {"root_id": 1, "app": "a", "status": status.COMPLETED, "xor_acc": 0}
    # The reconcile commits root_state as the lease's holder does: under its fence.
    with ledger_turn(settings, "reconcile") as fence:
        fence.claim([path])
        pending = {"root_id": 1, "app": "a", "status": status.PENDING}
        append_new(ledger, state_rows(spark, pending))

        # Another Delta writer's append, in a session of its own: the fence's transaction id
        # is a session setting of the MERGE's (Delta's txnAppId), not this writer's.
        elsewhere = spark.newSession()

        def other() -> None:
            row = {"root_id": 2, "app": "b", "status": status.PENDING}
            state_rows(elsewhere, row).write.format("delta").mode("append").save(path)

        with (
            caplog.at_level(logging.WARNING, "ackfold.ledger.storage.conflicts"),
            meanwhile(tmp_path, other) as hold,
        ):
            rows = state_rows(spark, completed, prior=True)
            rows = rows.withColumn("last_stage", hold(rows["last_stage"]))
            changed = merge_updates(ledger, rows, [(DAY, status.PENDING)])

    retries = [
        r.getMessage() for r in caplog.records if r.name == "ackfold.ledger.storage.conflicts"
    ]
    assert len(retries) == 1, retries
    assert retries[0].startswith(f"MERGE into {path}: Concurrent")
    assert "(a concurrent commit got there first); try 2 of 6 in " in retries[0]
    assert changed == 1
    final = {r["root_id"]: r["status"] for r in spark.read.format("delta").load(path).collect()}
    assert final == {1: status.COMPLETED, 2: status.PENDING}


def test_a_tracking_append_that_loses_to_a_metadata_change_is_retried_and_written_once(
    spark: SparkSession,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stage's micro-batch appends its events in Spark (as with an object store, or
    through Connect) while the table's properties change (what maintenance's retention
    setting does): the append is retried and its rows are in the table once; a re-run of
    the same batch appends exact copies of them, nothing else."""
    monkeypatch.setattr(write, "driver_writer", lambda spark, ledger: None)
    warehouse = str(tmp_path / "warehouse")
    ledger = Ledger(warehouse)
    create_tables(spark, ledger, (ACK_EVENTS,))
    path = ledger.path(ACK_EVENTS)
    spout = StageTracker("orders", "spout", ledger=warehouse, writer_id="conflict-test")

    def other() -> None:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('ackfold.test' = 'changed')")

    with (
        caplog.at_level(logging.WARNING, "ackfold.ledger.storage.conflicts"),
        meanwhile(tmp_path, other) as hold,
    ):
        batch = spark.createDataFrame([("m-1",), ("m-2",)], "id string")
        out = spout.spout(batch.withColumn("id", hold(batch["id"])), message_id="id", source="sqs")
        spout.write_batch(7, events=[out.events])

    assert [
        r.getMessage().split(";")[0]
        for r in caplog.records
        if r.name == "ackfold.ledger.storage.conflicts"
    ] == [f"append to {path}: MetadataChangedException (a concurrent commit got there first)"]
    events = spark.read.format("delta").load(path)
    assert events.count() == 2
    spout.write_batch(7, events=[out.events])  # the batch run again: copies, read once
    again = spark.read.format("delta").load(path)
    assert again.count() == 4
    assert again.select("event_id", "root_id", "kind", "ack_val").distinct().count() == 2
