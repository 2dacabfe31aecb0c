"""A tracked Structured Streaming app on SQS to copy, replay-safe end to end.

Orders arrive as JSON on an SQS queue (`{"items": ["tea", "milk"]}`). The ingester
registers each as a root before it deletes it; the one stage, `store`, MERGEs one row per
item into `<warehouse>/apps/<app>/lines`, keyed on `(origin_root_id, position)`, then acks
the order (or fails one without items). A replay (the same `origin_root_id`, a new
attempt) inserts only what an earlier attempt left out.

    spark-submit spark_apps/sqs_app.py --queue orders [--app orders] [--continuous]

As a DAG: `apps.<app>.dag` (docs/dags.md); your own stages: docs/tracking/spark.md.
"""

from __future__ import annotations

import argparse
import threading
from typing import Any

from ackfold import StageTracker, load_settings
from ackfold.config import Settings
from ackfold.sources.ingest import Ingester
from ackfold.sources.sqs import SqsQueue
from ackfold.spark import get_spark
from ackfold.track.write import query_name

STAGE = "store"
LINES = "origin_root_id bigint, position int, item string"
KEY = "t.origin_root_id = s.origin_root_id AND t.position = s.position"
# Insert-only: a replayed order (same origin, same positions) adds nothing it already has.
INSERT = "WHEN NOT MATCHED THEN INSERT *"


def build(spark: Any, settings: Settings, queue: str, *, app: str) -> tuple[Ingester, Any]:
    """The app's ingester and its query, not yet started (a `DataStreamWriter`)."""
    from pyspark.sql import functions as F

    ingester = Ingester(spark, settings, app, SqsQueue(settings, queue), to=[STAGE])
    store = StageTracker(app, STAGE, ledger=settings.table_root)
    lines = f"{settings.table_root}/apps/{app}/lines"
    spark.createDataFrame([], LINES).write.format("delta").mode("ignore").save(lines)

    def store_batch(batch: Any, batch_id: int) -> None:
        orders = batch.withColumn("order", F.from_json("payload", "items array<string>"))
        has_items = F.coalesce(F.size("order.items") > 0, F.lit(False))
        good, bad = orders.where(has_items), orders.where(~has_items)
        rows = good.select("origin_root_id", F.posexplode("order.items").alias("position", "item"))
        # By key, then the acks: a replay or a re-run batch inserts only what is missing.
        rows.dropDuplicates(["origin_root_id", "position"]).createOrReplaceTempView("lines")
        batch.sparkSession.sql(f"MERGE INTO delta.`{lines}` t USING lines s ON {KEY} {INSERT}")
        store.write_batch(batch_id, events=[store.ack(good), store.fail(bad, "no items")])

    writer = (
        ingester.stream()
        .writeStream.queryName(query_name(app, STAGE))
        .foreachBatch(store_batch)
        .option("checkpointLocation", f"{settings.table_root}/_checkpoints/apps/{app}/{STAGE}")
    )
    return ingester, writer


def run(spark: Any, settings: Settings, queue: str, *, app: str, continuous: bool) -> None:
    """Ingest and store the orders of `queue`: what it holds now, or (`continuous`) until
    the query fails."""
    ingester, writer = build(spark, settings, queue, app=app)
    if not continuous:
        ingester.run(until_idle=1.0)
        writer.trigger(availableNow=True).start().awaitTermination()
        return
    query = writer.trigger(processingTime="5 seconds").start()
    stop = threading.Event()

    def watch() -> None:
        try:
            query.awaitTermination()
        finally:
            stop.set()  # a failed query stops the ingester; the last line raises its error

    threading.Thread(target=watch, daemon=True).start()
    try:
        ingester.run(stop=stop)
    finally:
        query.stop()
    query.awaitTermination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="sqs_app.py")
    parser.add_argument("--queue", required=True, help="the SQS queue the orders arrive on")
    parser.add_argument("--app", default="orders", help="the app's name in the ledger")
    parser.add_argument("--continuous", action="store_true", help="run until it fails")
    args = parser.parse_args()
    settings = load_settings()
    spark = get_spark(settings, app_name=f"ackfold-{args.app}", app=args.app)
    run(spark, settings, args.queue, app=args.app, continuous=args.continuous)
    spark.stop()
