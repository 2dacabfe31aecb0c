"""Kafka benchmark: ingest (records registered as roots per second) and replay (roots
re-read and republished per second) against a real local broker.

    .venv/bin/python bench/kafka.py [--records 20000] [--replays 10000] [--payload 200]

Starts a KRaft broker on a free loopback port and measures, in one Spark session:

- confluent-kafka producing the records alone (the ceiling of anything that sends);
- ingest: Spark's Kafka source and `KafkaSpout.register` (roots and init events to Delta,
  per micro-batch of `kafka.max_offsets_per_trigger`), from a full topic to the end;
- re-reading the records alone, one position at a time and as a replay reads them;
- the real replay end to end (`run_replay` on the embedded engine: no JVM), unthrottled,
  of `--replays` failed roots written by delta-rs: plan (with the expiry check),
  write-ahead log, re-read, produce, mark, statuses.

Prints one line per measurement and a JSON summary. Record the output in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from common import per_second
from confluent_kafka import Producer
from replay import failed_ledger, time_replay  # bench/replay.py

from ackfold.config import load_settings
from ackfold.ledger.tables import ROOTS, Ledger
from ackfold.sources.kafka import KafkaTopic
from ackfold.sources.kafka_client import client_config
from ackfold.sources.kafka_records import Position
from ackfold.sources.kafka_spout import KafkaSpout
from ackfold.spark import get_spark
from ackfold_dev.kafka_broker import KafkaBroker
from ackfold_dev.ports import free_port

TOPIC = "bench-in"


def say(line: str) -> None:
    print(line, flush=True)


def produce(settings, count: int, payload: int) -> float:  # type: ignore[no-untyped-def]
    """Produce `count` records to partition 0 of TOPIC; returns the seconds it took."""
    producer = Producer(client_config(settings, **{"enable.idempotence": True, "acks": "all"}))
    pad = "x" * payload
    start = time.perf_counter()
    for n in range(count):
        value = json.dumps({"seq": n, "text": f"sentence {n} {pad}"}).encode()
        while True:
            try:
                producer.produce(TOPIC, value, str(n).encode(), partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--replays", type=int, default=10_000)
    parser.add_argument("--payload", type=int, default=200, help="value padding, bytes")
    args = parser.parse_args()
    assert args.replays <= args.records, "a replay re-reads a produced record"
    work = Path(tempfile.mkdtemp(prefix="ackfold-bench-kafka-"))
    port = free_port()
    settings = load_settings(
        var_dir=work, jars_dir=load_settings().jars_dir,
        kafka={"bootstrap_servers": f"127.0.0.1:{port}"},
        defaults={"replay_rate": 100_000},
    )  # fmt: skip
    results: dict[str, object] = {"records": args.records, "replays": args.replays}
    spark = get_spark(settings, app_name="ackfold-bench-kafka")
    with KafkaBroker(settings, port=port, data_dir=work / "kafka", topics=[TOPIC]):
        seconds = produce(settings, args.records, args.payload)
        results["produce_per_s"] = per_second(args.records / seconds)
        say(f"confluent-kafka produce alone: {args.records:,} records in {seconds:.1f} s "
            f"= {args.records / seconds:,.0f}/s")  # fmt: skip

        # Ingest: the spout stage only, as the first stage of an app runs it.
        ingest = Ledger(f"{work}/ingest")
        spout = KafkaSpout(
            spark, settings.model_copy(update={"warehouse": str(work / "ingest")}),
            "ingest", KafkaTopic(settings, TOPIC),
        )  # fmt: skip
        spout.check()
        start = time.perf_counter()
        query = (
            spout.stream().writeStream.foreachBatch(spout.register)
            .option("checkpointLocation", f"{work}/ingest/_checkpoints/spout")
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        seconds = time.perf_counter() - start
        registered = spark.read.format("delta").load(ingest.path(ROOTS)).count()
        assert registered == args.records, registered
        batches = len(query.recentProgress)
        results.update(ingest_per_s=per_second(args.records / seconds), ingest_batches=batches)
        say(f"ingest (Kafka source, roots and init events to Delta): {args.records:,} "
            f"records in {seconds:.1f} s, {batches} micro-batches = "
            f"{args.records / seconds:,.0f}/s")  # fmt: skip

        # Re-reading alone: one seek per position, then reading runs of positions forward.
        topic = KafkaTopic(settings, TOPIC)
        positions = [Position(TOPIC, 0, n) for n in range(args.replays)]
        start = time.perf_counter()
        for position in positions:
            assert position in topic.reread([position])
        seconds = time.perf_counter() - start
        results["reread_one_by_one_per_s"] = per_second(args.replays / seconds)
        say(f"re-read alone, one position at a time: {args.replays:,} records in "
            f"{seconds:.1f} s = {args.replays / seconds:,.0f}/s")  # fmt: skip
        start = time.perf_counter()
        assert len(topic.reread(positions)) == args.replays
        seconds = time.perf_counter() - start
        results["reread_runs_per_s"] = per_second(args.replays / seconds)
        say(f"re-read alone, as a replay does (runs of nearby offsets): {args.replays:,} "
            f"records in {seconds:.1f} s = {args.replays / seconds:,.0f}/s")  # fmt: skip
        topic.close()

        # The real replay, end to end, on the embedded engine (the ledger by delta-rs).
        failed_ledger(settings.table_root, TOPIC, args.replays, args.payload, kafka=True)
        timed = time_replay(settings, args.replays)
        results.update(replay_per_s=timed.pop("per_s"), **timed)
        say(f"replay end to end (embedded): {args.replays:,} roots in "
            f"{timed['replay_seconds']} s (plan {timed['plan_seconds']} s) = "
            f"{results['replay_per_s']:,}/s")  # fmt: skip
    say(json.dumps(results, sort_keys=True))
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
    os._exit(0)  # delta-rs may abort at interpreter exit (DESIGN.md)
