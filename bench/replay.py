"""Replay benchmark: messages per second from the ledger to a real ElasticMQ.

    .venv/bin/python bench/replay.py [--messages 10000] [--payload 200] [--chunk N] [--spark]

Starts ElasticMQ on a free loopback port, writes a ledger of failed SQS roots with
delta-rs (no JVM), then measures, in this one run: boto3 `SendMessageBatch` alone, one
call after another (the queue alone), and the real replay run end to end (`run_replay`:
the ledger's turn, plan, write-ahead log, send, mark, statuses), unthrottled, on the
embedded engine; with `--spark`, also on the Spark engine, over a fresh copy of the same
ledger. Prints one line per measurement and a JSON summary. Record the output in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import checkout  # noqa: F401  (before settings load: the checkout's var/)
from common import per_second

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import ROOT_STATE, ROOTS
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replay import run_replay
from ackfold_dev.elasticmq import ElasticMQ
from ackfold_dev.ports import free_port

APP = "bench"


def failed_ledger(
    warehouse: str, queue: str, count: int, payload: int, *, kafka: bool = False
) -> None:
    """`count` roots of APP, registered from `queue` and failed at stage `work`, written by
    delta-rs. SQS roots carry their payload; Kafka roots (`kafka`) point at
    `<queue>:0:<n>`, n = 0..count-1."""
    import pyarrow as pa

    from ackfold.ledger.schema import ids

    writer = LedgerWriter(warehouse)
    writer.create()
    t0 = datetime.now(UTC) - timedelta(hours=1)
    root_ids = pa.array([ids.hash64("bench", n) for n in range(count)], pa.int64())
    n_text = [str(n) for n in range(count)]
    pad = "x" * payload

    def same(value: Any, kind: pa.DataType) -> pa.Array:
        return pa.array([value] * count, kind)

    stamp = pa.timestamp("us", tz="UTC")
    source = "kafka" if kafka else "sqs"
    writer.append_arrow(
        ROOTS,
        pa.table(
            {
                "root_id": root_ids, "app": same(APP, pa.string()), "attempt": same(1, pa.int32()),
                "origin_root_id": root_ids, "source": same(source, pa.string()),
                "source_queue": same(queue, pa.string()), "source_message_id": pa.array(n_text),
                "source_position": pa.array([f"{queue}:0:{n}" for n in n_text])
                if kafka else same(None, pa.string()),
                "payload": same(None, pa.string()) if kafka
                else pa.array([f'{{"n": {n}, "pad": "{pad}"}}' for n in n_text]),
                "ingested_at": same(t0, stamp),
            }
        ),
    )  # fmt: skip
    writer.append_arrow(
        ROOT_STATE,
        pa.table(
            {
                "root_id": root_ids, "app": same(APP, pa.string()),
                "status": same("failed", pa.string()), "xor_acc": same(7, pa.int64()),
                "event_count": same(2, pa.int64()), "first_event_at": same(t0, stamp),
                "last_event_at": same(t0, stamp), "status_changed_at": same(t0, stamp),
                "attempt": same(1, pa.int32()), "origin_root_id": root_ids,
                "last_stage": same("work", pa.string()),
                "fail_reason": same("benchmark failure", pa.string()),
                "fail_stage": same("work", pa.string()), "fail_at": same(t0, stamp),
                "init_seen": same(True, pa.bool_()),
                "seen_event_hashes": same([], pa.list_(pa.int64())),
                "reconciled_at": same(t0, stamp), "first_event_date": same(t0.date(), pa.date32()),
            }
        ),
    )  # fmt: skip


def time_replay(settings: Settings, count: int, *, engine: str = "embedded") -> dict[str, Any]:
    """Replay APP's `count` failed roots end to end on `engine`, unthrottled (`run_replay`,
    as the DAG and the CLI run it); returns its rate (`per_s`), seconds, plan seconds."""
    settings = settings.model_copy(
        update={"engine": settings.engine.model_copy(update={"kind": engine})}
    )
    spark = None
    if engine == "spark":
        from ackfold.runs.replayer import Replayer
        from ackfold.spark import get_spark

        spark = get_spark(settings, app_name="ackfold-bench-replay")
        # Warm the JVM's plan paths on a throwaway plan of nothing.
        Replayer(spark, settings).plan(ReplayRequest(app="nothing", requested_by="bench"))
    planned: list[float] = []
    start = time.perf_counter()
    summary = run_replay(
        settings,
        ReplayRequest(app=APP, requested_by="bench"),
        spark=spark,
        on_plan=lambda plan: planned.append(time.perf_counter()),
    )
    seconds = time.perf_counter() - start
    assert summary.sent == count, summary
    return {
        "per_s": per_second(count / seconds),
        "replay_seconds": round(seconds, 2),
        "plan_seconds": round(planned[0] - start, 2),
        "chunk": settings.replay.chunk,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--payload", type=int, default=200, help="payload padding, bytes")
    parser.add_argument("--chunk", type=int, help="replay.chunk (default: the setting's)")
    parser.add_argument("--spark", action="store_true", help="also replay on the Spark engine")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ackfold-bench-replay-"))
    port = free_port()
    settings = load_settings(
        var_dir=work,
        jars_dir=load_settings().jars_dir,
        sqs={"endpoint_url": f"http://127.0.0.1:{port}"},
        defaults={"replay_rate": 100_000},
        **({"replay": {"chunk": args.chunk}} if args.chunk else {}),
    )
    results: dict[str, object] = {"messages": args.messages}
    with ElasticMQ(settings, port=port) as server:
        client = server.client()
        baseline_url = client.create_queue(QueueName="baseline")["QueueUrl"]
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

        for engine in ("embedded", "spark") if args.spark else ("embedded",):
            queue = f"replayed-{engine}"
            client.create_queue(QueueName=queue)
            here = settings.model_copy(update={"warehouse": str(work / engine)})
            failed_ledger(here.table_root, queue, args.messages, args.payload)
            timed = time_replay(here, args.messages, engine=engine)
            key = "replay_msgs_per_s" if engine == "embedded" else "spark_replay_msgs_per_s"
            results[key] = timed.pop("per_s")
            results.update({f"{engine}_{k}": v for k, v in timed.items()})
            print(f"replay end to end ({engine}): {args.messages:,} messages in "
                  f"{timed['replay_seconds']} s (plan {timed['plan_seconds']} s) = "
                  f"{results[key]:,} msgs/s", flush=True)  # fmt: skip
            attributes = client.get_queue_attributes(
                QueueUrl=client.get_queue_url(QueueName=queue)["QueueUrl"],
                AttributeNames=["ApproximateNumberOfMessages"],
            )["Attributes"]
            assert int(attributes["ApproximateNumberOfMessages"]) == args.messages
    print(json.dumps(results, sort_keys=True), flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
    os._exit(0)  # delta-rs may abort at interpreter exit (DESIGN.md)
