"""Tracking overhead: the word count with ackfold tracking against the same app without.

    .venv/bin/python bench/wordcount.py [--messages 5000] [--rounds 2] [--batch 1000]
                                        [--remote sc://HOST:PORT]

Starts ElasticMQ on a free loopback port. Each round sends `--messages` sentences to each
of three queues and runs, each to the end of its queue, three apps in turn: the tracked
app (`ackfold.demo.wordcount.WordCount`, no faults) with compact acks (the default), the
same with per-tuple acks (one ack event per word, as before compact acks), and the
untracked app below: the same receive, land-then-delete loop, the same split and the
same keyed MERGE into the sink, but no `roots` rows, no `_ackfold` column and no ack
events. All run in one process, on one Spark session, alternately, each tracked app on a
warehouse of its own. Prints messages per second for each, the overhead of each tracked
mode, and the `ack_events` rows and bytes (its parquet files) per message. With
`--remote`, the session is a Spark Connect one, and every app's batches run in the server.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import checkout  # noqa: F401  (before settings load: the checkout's var/)
from common import CpuClock, per_second
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackfold.config import Settings, load_settings
from ackfold.config.demo import FaultSettings
from ackfold.demo.feed import NOT_WORD_PATTERN, Feed
from ackfold.demo.wordcount import WordCount, with_demo_policy
from ackfold.sources.sqs import SqsQueue
from ackfold.spark import get_spark, is_connect
from ackfold_dev.elasticmq import ElasticMQ


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


LANDING = "message_id STRING, body STRING, ingested_at TIMESTAMP"
WORDS = "message_id STRING, position INT, word STRING"


class Untracked:
    """The word count as a user would write it without ackfold, on the same plumbing."""

    def __init__(self, spark: SparkSession, settings: Settings, queue: str) -> None:
        self.spark = spark
        self.queue = SqsQueue(settings, queue)
        self.max_messages = settings.sqs.max_messages_per_batch
        self.wait = int(settings.sqs.wait_time.total_seconds())
        home = f"{settings.table_root}/untracked"
        self.landing, self.words, self.counted = (f"{home}/{t}" for t in ("in", "words", "sink"))
        self.checkpoints = f"{home}/_checkpoints"
        for path, ddl in ((self.landing, LANDING), (self.words, WORDS), (self.counted, WORDS)):
            spark.createDataFrame([], ddl).write.format("delta").mode("ignore").save(path)

    def step(self) -> None:
        while messages := self._receive():
            now = datetime.now(UTC)
            rows = [(m.message_id, m.body, now) for m in messages]
            landed = self.spark.createDataFrame(rows, LANDING)
            landed.write.format("delta").mode("append").save(self.landing)
            self.queue.acknowledge(messages)
        # Functions of paths only: through Spark Connect they run in the server's worker.
        for name, source, batch in (
            ("split", self.landing, partial(split_into, self.words)),
            ("count", self.words, partial(count_into, self.counted)),
        ):
            (
                self.spark.readStream.format("delta").load(source).writeStream
                .foreachBatch(batch).option("checkpointLocation", f"{self.checkpoints}/{name}")
                .trigger(availableNow=True).start().awaitTermination()
            )  # fmt: skip

    def _receive(self) -> list[object]:
        """Up to max_messages_per_batch, 10 a call, as the ingester fills a batch."""
        batch: list = []  # type: ignore[type-arg]
        while len(batch) < self.max_messages:
            # A long poll first, as the ingester does: both end on one empty long poll.
            more = self.queue.receive(self.max_messages - len(batch), 0 if batch else self.wait)
            if not more:
                break
            batch.extend(more)
        return batch


def split_into(words: str, frame: DataFrame, batch_id: int) -> None:
    """The split stage's batch: each sentence's words, appended once per batch id."""
    text = F.get_json_object("body", "$.text")
    split = F.filter(F.split(F.lower(text), NOT_WORD_PATTERN), lambda w: w != "")
    exploded = frame.select("message_id", F.posexplode(split).alias("position", "word"))
    exploded.write.format("delta").mode("append").option("txnAppId", "untracked-split").option(
        "txnVersion", batch_id
    ).save(words)


def count_into(counted: str, frame: DataFrame, batch_id: int) -> None:
    """The count stage's batch: a keyed MERGE into the sink, as each API's users write it."""
    spark = frame.sparkSession
    on = "t.message_id = s.message_id AND t.position = s.position"
    if is_connect(spark):  # Delta's Python API reaches no Connect server; its SQL does
        frame.createOrReplaceTempView("untracked_words")
        spark.sql(f"MERGE INTO delta.`{counted}` t USING untracked_words s ON {on} "
                  "WHEN NOT MATCHED THEN INSERT *")  # fmt: skip
        return
    from delta.tables import DeltaTable

    (
        DeltaTable.forPath(spark, counted).alias("t").merge(frame.alias("s"), on)
        .whenNotMatchedInsertAll().execute()
    )  # fmt: skip


def timed(
    label: str, feed: Feed, client: object, url: str, run: object, cpu: CpuClock
) -> tuple[float, float]:
    """Send the feed, run the app to the end of its queue: its messages per second, and
    the CPU-seconds it took (this process and Spark's JVM)."""
    feed.send(client, url)
    start, used = time.perf_counter(), cpu()
    run()  # type: ignore[operator]
    seconds, used = time.perf_counter() - start, cpu() - used
    rate = len(feed.messages) / seconds
    print(f"{label:<10} {len(feed.messages):,} messages in {seconds:5.1f} s = {rate:,.1f} msgs/s"
          f", {used:5.1f} CPU-s", flush=True)  # fmt: skip
    return rate, used


MODES = ("compact", "per_tuple")


def ledger_size(spark: SparkSession, warehouse: str) -> tuple[int, int]:
    """Rows and bytes (its parquet files) of `ack_events` under `warehouse`."""
    rows = spark.read.format("delta").load(f"{warehouse}/ack_events").count()
    files = Path(warehouse, "ack_events").glob("*.parquet")
    return rows, sum(path.stat().st_size for path in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--batch", type=int, default=1000, help="sqs.max_messages_per_batch, for every app"
    )
    parser.add_argument(
        "--warm-up", type=int, default=50, help="messages of each app's warm-up run (0: none)"
    )
    parser.add_argument(
        "--remote", default=None, help="run every app through this sc:// Spark Connect server"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ackfold-bench-wordcount-"))
    port = free_port()
    settings = with_demo_policy(
        load_settings(
            var_dir=work, jars_dir=load_settings().jars_dir, spark={"remote": args.remote},
            sqs={"endpoint_url": f"http://127.0.0.1:{port}", "wait_time": "1s",
                 "max_messages_per_batch": args.batch},
        )
    )  # fmt: skip
    spark = get_spark(settings, app_name="ackfold-bench-wordcount")
    feed = Feed.build(args.messages, FaultSettings())
    warm = Feed.build(args.warm_up, FaultSettings())
    rates: dict[str, list[float]] = {name: [] for name in (*MODES, "untracked")}
    cpus: dict[str, list[float]] = {name: [] for name in rates}
    cpu = CpuClock(spark)
    with ElasticMQ(settings, port=port) as server:
        client = server.client()
        queues = {name: f"bench-{name.replace('_', '-')}-{uuid.uuid4().hex[:6]}" for name in rates}
        urls = {k: client.create_queue(QueueName=q)["QueueUrl"] for k, q in queues.items()}
        apps: dict[str, WordCount | Untracked] = {}
        for mode in MODES:
            client.create_queue(QueueName=f"{queues[mode]}-dlq")
            policy = settings.apps["wordcount"].model_copy(update={"source_queue": queues[mode]})
            own = settings.model_copy(
                update={"warehouse": str(work / mode), "apps": {"wordcount": policy}}
            )
            apps[mode] = WordCount(spark, own, acks=mode)
        apps["untracked"] = Untracked(spark, settings, queues["untracked"])
        # Warm up every path (JIT, Delta's code paths) on a small run each.
        for name, app in apps.items():
            if args.warm_up:
                timed(f"warm-up {name}", warm, client, urls[name], app.step, cpu)
        for _ in range(args.rounds):
            for name, app in apps.items():
                rate, used = timed(name, feed, client, urls[name], app.step, cpu)
                rates[name].append(rate)
                cpus[name].append(used)
        expected = (args.rounds * sum(feed.true_counts().values())) + sum(
            warm.true_counts().values()
        )
        for mode in MODES:
            app = apps[mode]
            assert isinstance(app, WordCount)
            words = sum(app.word_counts().values())
            assert words == expected, (mode, words, expected)
    median = {name: statistics.median(found) for name, found in rates.items()}
    cpu_median = {name: statistics.median(found) for name, found in cpus.items()}
    sent = args.warm_up + args.rounds * args.messages
    figures: dict[str, object] = {
        "messages": args.messages, "rounds": args.rounds, "batch": args.batch,
        "untracked_msgs_per_s": per_second(median["untracked"]),
    }  # fmt: skip
    for mode in MODES:
        overhead = 1 - median[mode] / median["untracked"]
        # CPU: what the tracked run spent beyond the untracked one, as a share of its time.
        cpu_overhead = 1 - cpu_median["untracked"] / cpu_median[mode]
        rows, size = ledger_size(spark, str(work / mode))
        print(
            f"tracking overhead, {mode} acks: {overhead:.0%} fewer messages per second "
            f"(median of {args.rounds}: {median[mode]:,.0f} vs {median['untracked']:,.0f} "
            f"msgs/s), {cpu_overhead:.0%} by CPU-seconds ({cpu_median[mode]:.1f} vs "
            f"{cpu_median['untracked']:.1f}); ack_events {rows / sent:.1f} rows and "
            f"{size / sent:,.0f} bytes per message"
        )
        figures.update({
            f"{mode}_msgs_per_s": per_second(median[mode]), f"{mode}_overhead": round(overhead, 3),
            f"{mode}_cpu_s": round(cpu_median[mode], 2),
            f"{mode}_cpu_overhead": round(cpu_overhead, 3),
            f"{mode}_rows_per_msg": round(rows / sent, 2),
            f"{mode}_bytes_per_msg": round(size / sent),
        })  # fmt: skip
    figures["untracked_cpu_s"] = round(cpu_median["untracked"], 2)
    print(json.dumps(figures, sort_keys=True))
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
