"""Replay benchmark: messages per second from the ledger to a real ElasticMQ.

    .venv/bin/python bench/replay.py [--messages 10000] [--payload 200] [--chunk N]

Starts ElasticMQ on a free loopback port, writes a ledger of failed SQS roots through the
real tables, then measures: boto3 `SendMessageBatch` alone (the ceiling), and the real
replay run end to end (plan, write-ahead log, send, mark, statuses), unthrottled. Prints
one line per measurement and a JSON summary. Record the output in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from common import per_second

from ackfold.config import load_settings
from ackfold.ledger.tables import ROOT_STATE, ROOTS, Ledger
from ackfold.local.elasticmq import ElasticMQ
from ackfold.local.ports import free_port
from ackfold.replay.replayer import Replayer
from ackfold.replay.request import ReplayRequest
from ackfold.spark import get_spark

APP = "bench"


def failed_ledger(  # type: ignore[no-untyped-def]
    spark, ledger: Ledger, queue: str, count: int, payload: int, *, kafka: bool = False
) -> None:
    """`count` roots of APP, registered from `queue` and failed at stage `work`. SQS roots
    carry their payload; Kafka roots (`kafka`) point at `<queue>:0:<n>`, n = 0..count-1."""
    from pyspark.sql import functions as F

    ledger.create(spark)
    t0 = datetime.now(UTC) - timedelta(hours=1)
    ids = spark.range(count).select(F.xxhash64(F.lit("bench"), "id").alias("root_id"), "id")
    text = F.concat(F.lit('{"n": '), F.col("id").cast("string"), F.lit(', "pad": "'))
    body = F.concat(text, F.lit("x" * payload), F.lit('"}'))
    position = F.concat(F.lit(f"{queue}:0:"), F.col("id").cast("string"))
    source = F.lit("kafka" if kafka else "sqs")
    roots = ids.select(
        "root_id", F.lit(APP).alias("app"), F.lit(1).alias("attempt"),
        F.col("root_id").alias("origin_root_id"), source.alias("source"),
        F.lit(queue).alias("source_queue"), F.col("id").cast("string").alias("source_message_id"),
        (position if kafka else F.lit(None).cast("string")).alias("source_position"),
        (F.lit(None).cast("string") if kafka else body).alias("payload"),
        F.lit(t0).alias("ingested_at"),
    )  # fmt: skip
    roots.write.format("delta").mode("append").save(ledger.path(ROOTS))
    state = ids.select(
        "root_id", F.lit(APP).alias("app"), F.lit("failed").alias("status"),
        F.lit(7).cast("bigint").alias("xor_acc"), F.lit(2).cast("bigint").alias("event_count"),
        F.lit(t0).alias("first_event_at"), F.lit(t0).alias("last_event_at"),
        F.lit(t0).alias("status_changed_at"), F.lit(1).alias("attempt"),
        F.col("root_id").alias("origin_root_id"), F.lit("work").alias("last_stage"),
        F.lit("benchmark failure").alias("fail_reason"), F.lit("work").alias("fail_stage"),
        F.lit(t0).alias("fail_at"), F.lit(True).alias("init_seen"),
        F.array().cast("array<bigint>").alias("seen_event_hashes"),
        F.lit(t0).alias("reconciled_at"),
        F.to_date(F.lit(t0)).alias("first_event_date"),
    )  # fmt: skip
    state.write.format("delta").mode("append").save(ledger.path(ROOT_STATE))


def time_replay(spark, settings, count: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Replay APP's `count` failed roots end to end, unthrottled, after a warm-up; returns
    its rate (`per_s`), seconds, plan seconds and chunk."""
    # Warm the JVM's plan and MERGE paths on a throwaway replay of nothing.
    Replayer(spark, settings).plan(ReplayRequest(app="nothing", requested_by="bench"))
    replayer = Replayer(spark, settings)
    start = time.perf_counter()
    plan = replayer.plan(ReplayRequest(app=APP, requested_by="bench"))
    planned = time.perf_counter()
    summary = replayer.execute(plan)
    seconds = time.perf_counter() - start
    replayer.close()
    assert summary.sent == count, summary
    return {
        "per_s": per_second(count / seconds),
        "replay_seconds": round(seconds, 1),
        "plan_seconds": round(planned - start, 1),
        "chunk": settings.replay.chunk,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--payload", type=int, default=200, help="payload padding, bytes")
    parser.add_argument("--chunk", type=int, help="replay.chunk (default: the setting's)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ackfold-bench-replay-"))
    port = free_port()
    jars = load_settings().jars_dir
    settings = load_settings(
        var_dir=work,
        jars_dir=jars,
        sqs={"endpoint_url": f"http://127.0.0.1:{port}"},
        defaults={"replay_rate": 100_000},
        **({"replay": {"chunk": args.chunk}} if args.chunk else {}),
    )
    spark = get_spark(settings, app_name="ackfold-bench-replay")
    results: dict[str, object] = {"messages": args.messages}
    with ElasticMQ(settings, port=port) as server:
        client = server.client()
        baseline_url = client.create_queue(QueueName="baseline")["QueueUrl"]
        client.create_queue(QueueName="replayed")
        body = "x" * (args.payload + 20)
        start = time.perf_counter()
        for first in range(0, args.messages, 10):
            entries = [
                {"Id": str(i), "MessageBody": body} for i in range(min(10, args.messages - first))
            ]
            client.send_message_batch(QueueUrl=baseline_url, Entries=entries)
        seconds = time.perf_counter() - start
        results["boto3_send_batch_msgs_per_s"] = per_second(args.messages / seconds)
        print(f"boto3 SendMessageBatch alone: {args.messages:,} messages in {seconds:.1f} s "
              f"= {args.messages / seconds:,.0f} msgs/s", flush=True)  # fmt: skip

        ledger = Ledger(settings.table_root)
        failed_ledger(spark, ledger, "replayed", args.messages, args.payload)
        timed = time_replay(spark, settings, args.messages)
        results.update(replay_msgs_per_s=timed.pop("per_s"), **timed)
        print(f"replay end to end: {args.messages:,} messages in {timed['replay_seconds']} s "
              f"(plan {timed['plan_seconds']} s) = {results['replay_msgs_per_s']:,} msgs/s",
              flush=True)  # fmt: skip
        attributes = client.get_queue_attributes(
            QueueUrl=client.get_queue_url(QueueName="replayed")["QueueUrl"],
            AttributeNames=["ApproximateNumberOfMessages"],
        )["Attributes"]
        assert int(attributes["ApproximateNumberOfMessages"]) == args.messages
    print(json.dumps(results, sort_keys=True))
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
