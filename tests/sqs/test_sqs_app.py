"""The SQS app template of `spark_apps/`, as a team copies it, on the real ElasticMQ: each
order is stored once by key, a replay of it (attempt 2, the same origin root, as
`ackfold replay` sends it) adds no line twice, and the reconcile tells each root's status."""

from __future__ import annotations

import json
import runpy
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.demo.feed import send_bodies
from ackfold.runs.reconcile import reconcile
from ackfold.sources.base import Outbound
from ackfold.sources.sqs import SqsQueue
from ackfold.sources.sqs_client import sqs_client
from tests.conftest import JARS_DIR, PROJECT_DIR
from tests.sqs.topology import create_queue

TEA = json.dumps({"items": ["tea", "milk"]})


def test_the_sqs_app_stores_each_order_once_across_a_replay(
    spark: SparkSession, sqs_server: Any, tmp_path: Path
) -> None:
    settings = load_settings(
        var_dir=tmp_path / "var",
        jars_dir=JARS_DIR,
        spark={"master": "local[2]", "shuffle_partitions": 2},
        sqs={"endpoint_url": sqs_server.endpoint_url, "wait_time": "1s"},
    )
    queue = f"orders-{uuid.uuid4().hex[:8]}"
    url = create_queue(sqs_client(settings), queue)
    send_bodies(sqs_client(settings), url, [TEA, json.dumps({"items": []}), "not json"])
    app = runpy.run_path(str(PROJECT_DIR / "spark_apps" / "sqs_app.py"))
    app["run"](spark, settings, queue, app="orders", continuous=False)

    assert reconcile(spark, settings, app="orders")["by_status"] == {"completed": 1, "failed": 2}
    state = spark.read.format("delta").load(f"{settings.table_root}/root_state")
    assert {row.fail_reason for row in state.where("status = 'failed'").collect()} == {"no items"}
    done = state.where("status = 'completed'").first()
    assert done is not None

    # Attempt 2 of the completed order, as a replay sends it: its lines are there already.
    SqsQueue(settings, queue).republish(
        [Outbound(root_id=done.root_id, origin_root_id=done.origin_root_id, attempt=2, body=TEA)]
    )
    app["run"](spark, settings, queue, app="orders", continuous=False)

    lines = spark.read.format("delta").load(f"{settings.table_root}/apps/orders/lines")
    assert sorted((r.origin_root_id, r.position, r.item) for r in lines.collect()) == [
        (done.origin_root_id, 0, "tea"),
        (done.origin_root_id, 1, "milk"),
    ]
    summary = reconcile(spark, settings, app="orders")
    assert summary["by_status"] == {"completed": 2, "failed": 2}
    attempts = spark.read.format("delta").load(f"{settings.table_root}/root_state")
    replayed = attempts.where(f"origin_root_id = {done.origin_root_id} AND attempt = 2").first()
    assert replayed is not None
    assert replayed.status == "completed"
