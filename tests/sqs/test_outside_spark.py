"""A producer outside Spark: plain Python reads the real ElasticMQ, tracks its work with
`Tracker` and writes the ledger with `LedgerWriter` (no JVM); then the real reconcile
classifies its roots and the real replay sends the failed and timed-out ones back to the
queue. The ledger's tables are all delta-rs' (`LedgerWriter.create`, as `ackfold init`),
so this also shows that Spark's reconcile, replay and maintenance run on them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from ackfold import LedgerWriter, Tracker
from ackfold.config import load_settings
from ackfold.demo.feed import send_bodies
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import REPLAY_LOG, ROOT_STATE, ROOTS, TABLES, Ledger
from ackfold.maintenance import run_maintenance
from ackfold.replay.request import ReplayRequest
from ackfold.runs.reconcile import reconcile
from ackfold.runs.replayer import Replayer
from ackfold.sources.base import ATTEMPT, ORIGIN_ROOT_ID
from ackfold.sources.sqs_client import sqs_client
from tests.conftest import JARS_DIR
from tests.sqs.topology import create_queue, drain

APP = "webhooks"
PRODUCER = "webhooks-producer"


def test_a_plain_python_producer_is_reconciled_and_replayed(
    spark: SparkSession, sqs_server: Any, tmp_path: Any
) -> None:
    settings = load_settings(
        var_dir=tmp_path / "var",
        jars_dir=JARS_DIR,
        spark={"master": "local[2]"},
        sqs={"endpoint_url": sqs_server.endpoint_url, "wait_time": "1s"},
        defaults={"timeout": "5m", "max_attempts": 3, "replay_backoff": "1s"},
    )
    client = sqs_client(settings)
    queue = f"webhooks-{uuid.uuid4().hex[:8]}"
    url = create_queue(client, queue)
    send_bodies(client, url, ["ok-1", "ok-2", "bad", "stuck"])

    # The producer: no Spark anywhere from here to the reconcile.
    writer = LedgerWriter(settings.table_root)
    assert writer.create() == dict.fromkeys(TABLES, True)
    tracker = Tracker(APP)
    received = []
    while len(received) < 4:
        response = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=60
        )
        received.extend(response.get("Messages", []))
    first = {
        m["Body"]: tracker.spout(
            m["MessageId"], source="sqs", source_queue=queue, payload=m["Body"], to=["handle"]
        )
        for m in received
    }
    roots = tracker.drain_roots()
    registered = writer.append(roots, tracker.drain(), app_id=PRODUCER, version=1)
    assert (registered.roots, registered.events) == (4, 4)
    # Register before delete (invariant 6): the messages leave the queue only now.
    for message in received:
        client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    for body, t in first.items():
        if body == "bad":
            tracker.fail(t, stage="handle", reason="cannot parse the webhook")
            continue
        out = tracker.emit([t], stage="handle", to=["store"])
        tracker.ack(t, stage="handle")
        if body != "stuck":  # stuck: its child is never stored
            tracker.ack(out, stage="store")
    events = tracker.drain()
    assert writer.append((), events, app_id=PRODUCER, version=2).events == 6
    # A retry of version 2 (say the producer crashed before it saw the commit) writes nothing.
    assert writer.append((), events, app_id=PRODUCER, version=2).skipped == ("ack_events",)

    # The real reconcile (Spark), past the 5 minute timeout.
    later = datetime.now(UTC) + timedelta(hours=1)
    summary = reconcile(spark, settings, now=later)
    assert summary["by_status"] == {"completed": 2, "failed": 1, "timed_out": 1}
    root_of = {body: t.roots[0] for body, t in first.items()}
    assert _statuses(spark, settings.table_root, root_of) == {
        "ok-1": status.COMPLETED,
        "ok-2": status.COMPLETED,
        "bad": status.FAILED,
        "stuck": status.TIMED_OUT,
    }

    # The real replay sends the failed and the timed-out root back to the queue.
    replayer = Replayer(spark, settings, now=later + timedelta(hours=1))
    result = replayer.execute(replayer.plan(ReplayRequest(automatic=True, app=APP)))
    assert (result.sent, result.dead_lettered) == (2, 0)
    back = drain(client, url)
    assert sorted(m["Body"] for m in back) == ["bad", "stuck"]
    for message in back:
        attrs = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
        assert attrs[ATTEMPT] == "2"
        assert int(attrs[ORIGIN_ROOT_ID]) == root_of[message["Body"]]
    assert _statuses(spark, settings.table_root, root_of) == {
        "ok-1": status.COMPLETED,
        "ok-2": status.COMPLETED,
        "bad": status.REPLAYED,
        "stuck": status.REPLAYED,
    }
    ledger = Ledger(settings.table_root)
    log = spark.read.format("delta").load(ledger.path(REPLAY_LOG)).where("event = 'sent'")
    assert sorted(r["root_id"] for r in log.collect()) == sorted([root_of["bad"], root_of["stuck"]])

    # Maintenance (OPTIMIZE, Z-order, VACUUM) runs on the delta-rs tables, which stay
    # readable without a JVM (reader version 1).
    run_maintenance(settings, engine="spark", spark=spark, now=later)
    for table in TABLES:
        assert DeltaTable(ledger.path(table)).protocol().min_reader_version == 1
    assert DeltaTable(ledger.path(ROOTS)).to_pyarrow_table().num_rows == 4


def _statuses(spark: SparkSession, warehouse: str, root_of: dict[str, int]) -> dict[str, str]:
    rows = spark.read.format("delta").load(Ledger(warehouse).path(ROOT_STATE)).collect()
    by_root = {r["root_id"]: r["status"] for r in rows}
    return {body: by_root[root] for body, root in root_of.items()}
