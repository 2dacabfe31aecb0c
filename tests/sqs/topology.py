"""A one-stage tracked app on the SQS source, for the ingestion and replay tests.

Each message body is JSON `{"n": int, "fail_until": int}`. The `parse` stage writes `n` to
a Delta table keyed by the origin root (a replay must not count twice) and acks it, or
fails it explicitly: a malformed body, a negative `n` (poison: fails on every attempt),
or an attempt <= `fail_until` (a transient failure that a replay fixes).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackfold.config import Settings
from ackfold.ledger.schema.tables import ROOT_STATE, ROOTS, Ledger
from ackfold.replay.request import ReplayRequest
from ackfold.runs.reconcile import reconcile
from ackfold.runs.replayer import Replayer, ReplaySummary
from ackfold.sources.ingest import Ingester
from ackfold.sources.sqs import SqsQueue
from ackfold.track.stage import StageTracker

APP = "numbers"
STAGE = "parse"


def create_queue(client: Any, name: str) -> str:
    """`name` and `name-dlq`, through the real CreateQueue API; returns the queue's URL."""
    client.create_queue(QueueName=f"{name}-dlq")
    return str(client.create_queue(QueueName=name)["QueueUrl"])


def drain(client: Any, url: str) -> list[dict[str, Any]]:
    """Every message left on a queue (received and deleted), with its attributes."""
    found: list[dict[str, Any]] = []
    while True:
        response = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
            MessageAttributeNames=["All"], VisibilityTimeout=30,
        )  # fmt: skip
        messages = response.get("Messages", [])
        if not messages:
            return found
        found.extend(messages)
        client.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
            ],
        )


class NumbersApp:
    """The app's driver, run step by step: ingest, process, reconcile, replay."""

    def __init__(self, spark: SparkSession, settings: Settings, queue: str) -> None:
        self.spark = spark
        self.settings = settings
        self.ledger = Ledger(settings.table_root)
        self.queue = SqsQueue(settings, queue)
        self.ingester = Ingester(spark, settings, APP, self.queue, to=[STAGE])
        self.parse = StageTracker(APP, STAGE, ledger=self.ledger)
        self.output = f"{settings.table_root}/numbers_out"
        self.checkpoint = f"{settings.table_root}/_checkpoints/{APP}-{uuid.uuid4().hex[:8]}"

    def ingest(self) -> int:
        return self.ingester.run(until_idle=0.5).registered

    def process(self) -> None:
        """Run the `parse` stage over every registered root not processed yet."""
        query = (
            self.ingester.stream()
            .writeStream.foreachBatch(self._batch)
            .option("checkpointLocation", self.checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    def _batch(self, frame: DataFrame, batch_id: int) -> None:
        doc = F.from_json("payload", "n INT, fail_until INT")
        rows = frame.withColumn("doc", doc).cache()
        n = F.col("doc.n")
        malformed = rows.where(n.isNull())
        poison = rows.where(n < 0)
        transient = rows.where(
            (n >= 0) & (F.col("attempt") <= F.coalesce("doc.fail_until", F.lit(0)))
        )
        good = rows.where((n >= 0) & (F.col("attempt") > F.coalesce("doc.fail_until", F.lit(0))))
        out = good.select("origin_root_id", "attempt", n.alias("n"))
        self.parse.write_batch(
            batch_id,
            outputs={self.output: out},
            events=[
                self.parse.ack(good),
                self.parse.fail(malformed, "malformed body: not JSON with an integer n"),
                self.parse.fail(poison, "poison: n is negative"),
                self.parse.fail(transient, "transient failure"),
            ],
        )
        rows.unpersist()

    def reconcile(self) -> dict[str, Any]:
        return reconcile(self.spark, self.settings)

    def auto_replay(self) -> ReplaySummary:
        later = datetime.now(UTC) + timedelta(hours=6)  # past every backoff
        replayer = Replayer(self.spark, self.settings, now=later)
        return replayer.execute(replayer.plan(ReplayRequest(automatic=True, app=APP)))

    def cycle(self) -> ReplaySummary:
        self.ingest()
        self.process()
        self.reconcile()
        return self.auto_replay()

    # -- reading back -----------------------------------------------------------------

    def states(self) -> dict[int, dict[str, Any]]:
        rows = self.spark.read.format("delta").load(self.ledger.path(ROOT_STATE)).collect()
        return {r["root_id"]: r.asDict() for r in rows if r["app"] == APP}

    def roots(self) -> list[dict[str, Any]]:
        rows = self.spark.read.format("delta").load(self.ledger.path(ROOTS)).collect()
        return [r.asDict() for r in rows if r["app"] == APP]

    def outputs(self) -> dict[int, int]:
        rows = self.spark.read.format("delta").load(self.output).collect()
        return {r["origin_root_id"]: r["n"] for r in rows}


def body(n: int, fail_until: int = 0) -> str:
    return json.dumps({"n": n, "fail_until": fail_until})
