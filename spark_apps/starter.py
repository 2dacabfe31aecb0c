"""A tracked Structured Streaming app to copy: JSON orders dropped in a folder go into a
Delta table. Each order is a root; an order with a quantity is acked, one without is
failed with a reason, so that the reconcile marks it `failed` and the replay sees it.
Each order is stored as its root's payload, so a replay can re-drop it into the inbox.

    spark-submit spark_apps/starter.py --inbox DIR [--app orders] [--continuous]

Run it as an Airflow DAG (`ackfold_app_orders`) with an entry in `ackfold.yaml`:

    apps:
      orders:
        dag:
          application: spark_apps/starter.py
          args: ["--inbox", "s3a://my-bucket/inbox/orders"]
          schedule: "@hourly"

Each run takes the files that arrived since the last one and stops (`availableNow`);
`apps.orders.dag.mode: continuous` passes `--continuous`, which keeps it running.
A failed order replays through ackfold's files sender (`ackfold.sources.files`), once
the distribution you deploy registers it, in its `pyproject.toml`:

    [project.entry-points."ackfold.senders"]
    files = "ackfold.sources.files:FilesInbox"

It writes the stored order back as `<inbox>/replay-<new root id>.json`, with
`ackfold_origin_root_id` and `ackfold_attempt`; the next run registers it as that
attempt. Without a sender, a failed order is dead-lettered (docs/sources.md).
Replace `store_batch` with your own stages: `ackfold.StageTracker` has `emit`, `explode` and
`aggregate` for stages that make new tuples (docs/tracking/spark.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from pyspark.sql import functions as F

from ackfold import StageTracker, load_settings
from ackfold.config import Settings
from ackfold.sources.files import ATTEMPT_FIELD, ORIGIN_FIELD
from ackfold.spark import get_spark


def run(spark: Any, settings: Settings, inbox: str, *, app: str, continuous: bool) -> None:
    """Track the orders of `inbox` into `<warehouse>/<app>` until the folder is drained
    (or, `continuous`, until the query fails)."""
    store = StageTracker(app, "store", ledger=settings.table_root)

    def store_batch(batch: Any, batch_id: int) -> None:
        orders = store.spout(
            batch,
            message_id="id",
            source="files",
            source_queue=inbox,
            payload=F.to_json(F.struct("id", "qty")),  # what a replay re-drops
            # A replayed file says which attempt it is, and of which root; others are 1.
            origin_root_id=ORIGIN_FIELD,
            attempt=F.coalesce(ATTEMPT_FIELD, F.lit(1)),
        )
        good = orders.tuples.where("qty > 0")
        bad = orders.tuples.where("qty IS NULL OR qty <= 0")
        store.write_batch(
            batch_id,
            outputs={
                f"{settings.table_root}/{app}": good.drop("_ackfold", ORIGIN_FIELD, ATTEMPT_FIELD)
            },
            roots=orders.roots,
            events=[orders.events, store.ack(good), store.fail(bad, "no quantity")],
        )

    writer = (
        spark.readStream.schema(f"id string, qty int, {ORIGIN_FIELD} bigint, {ATTEMPT_FIELD} int")
        .json(inbox)
        .writeStream.foreachBatch(store_batch)
        .option("checkpointLocation", f"{settings.table_root}/_checkpoints/{app}")
    )
    trigger = {"processingTime": "30 seconds"} if continuous else {"availableNow": True}
    writer.trigger(**trigger).start().awaitTermination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="starter.py")
    parser.add_argument("--inbox", required=True, help="the folder the orders arrive in")
    parser.add_argument("--app", default="orders", help="the app's name in the ledger")
    parser.add_argument("--continuous", action="store_true", help="run until it fails")
    args = parser.parse_args()
    settings = load_settings()
    spark = get_spark(settings, app_name=f"ackfold-{args.app}")
    run(spark, settings, args.inbox, app=args.app, continuous=args.continuous)
    spark.stop()
