"""Kafka benchmark: tracked against untracked on the same records, then re-read and replay,
against a real local broker.

    .venv/bin/python bench/kafka.py [--records 220000] [--rounds 2] [--batch 10000]
                                    [--replays 10000]
                                    [--queries ingest,pipeline,...] [--warmup 0]

Starts a KRaft broker on a free loopback port, produces `--records` of the demo's
sentences (JSON, as the demo's feed sends them) over the topic's two partitions, and
measures, in one Spark session:

- confluent-kafka producing the records alone (the ceiling of anything that sends);
- **ingest**: the tracked spout (`KafkaSpout.register`: `roots` rows and `init` events to
  the ledger) against Spark's own Kafka source writing the same records to a Delta table,
  untracked (a plain `writeStream.format("delta")`);
- **the word count as one query** (`pipeline`): Kafka, split, and a Delta sink of the
  words in one streaming query, tracked (one registration and one ack per root: the tree
  is processed in one micro-batch, and the words' write gathers both:
  `register_one_pass`, `explode_acked`) against the same query untracked;
- **the same, two passes** (`pipeline_two_pass`): as the query was written before the
  one pass (`register`, a Spark job of its own, then the words, then the acks' job),
  against the same untracked runs;
- **the untracked query in `foreachBatch`** (`foreach_batch`): the words written once
  per batch (`txnAppId`/`txnVersion`), as every tracked query must write them;
- **a probe of batch ranges** (`ranges_probe`, docs/decisions/batch-ranges.md, not built
  yet): the same, plus each partition's first and last offset observed by the words'
  write and appended with delta-rs, one commit a batch; what a range costs a batch;
- re-reading records alone, one position at a time and as a replay reads them;
- the real replay end to end (`run_replay` on the embedded engine: no JVM), unthrottled,
  of `--replays` failed roots written by delta-rs.

Every query reads the topic from its start to its end in micro-batches of `--batch`
records (`kafka.max_offsets_per_trigger`). Each is timed apart in two parts: the **start**,
from `start()` to the end of its first micro-batch (JVM code paths, the Kafka consumer,
Delta's log), and the **steady state**, the records of every later batch over the time
from the end of the first batch to the end of the last. Tracked and untracked runs
alternate, `--rounds` times, the order rotated each round; the figure of each is the
median of the rounds; `--warmup` rounds run first and are not counted (the JIT compiles
each query's code paths in its first run). `--queries` picks the comparisons (all by
default). Prints one line per measurement and a JSON summary. Record the output in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import checkout  # noqa: F401  (before settings load: the checkout's var/)
import pyarrow as pa
from common import CpuClock, per_second
from confluent_kafka import Producer
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from replay import failed_ledger, time_replay  # bench/replay.py

from ackfold.config import Settings, load_settings
from ackfold.demo.feed import NOT_WORD_PATTERN, sentences
from ackfold.ledger.commits import dml
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.sources.kafka import KafkaTopic
from ackfold.sources.kafka_client import client_config
from ackfold.sources.kafka_records import Position
from ackfold.sources.kafka_spout import KafkaSpout
from ackfold.spark import get_spark
from ackfold.track.stage import StageTracker
from ackfold_dev.kafka_broker import KafkaBroker
from ackfold_dev.ports import free_port

TOPIC = "bench-in"
PARTITIONS = 2
SINK = "sink"
# The tracked sink's key: a word of a sentence, the same on every attempt of the sentence.
KEY = ("origin_root_id", "position")
ON_KEY = "t.origin_root_id = s.origin_root_id AND t.position = s.position"
INSERT_WORDS = (
    "WHEN NOT MATCHED THEN INSERT (origin_root_id, position, word) "
    "VALUES (s.origin_root_id, s.position, s.word)"
)


# Each comparison: the tracked query and its untracked baseline (methods of `Rounds`).
QUERIES = {
    "ingest": ("ingest_tracked", "ingest_untracked"),
    "pipeline": ("pipeline_tracked", "pipeline_untracked"),
    "pipeline_two_pass": ("pipeline_two_pass", "pipeline_untracked"),
    "foreach_batch": ("pipeline_foreach", "pipeline_untracked"),
    "ranges_probe": ("pipeline_ranges", "pipeline_untracked"),
}
# What the probe of batch ranges commits per batch (docs/decisions/batch-ranges.md): one
# row per partition, not yet a ledger table.
RANGES = pa.schema([
    ("app", pa.string()), ("batch_id", pa.int64()), ("source_queue", pa.string()),
    ("partition", pa.int32()), ("first_offset", pa.int64()), ("last_offset", pa.int64()),
    ("records", pa.int64()), ("committed_at", pa.timestamp("us", tz="UTC")),
])  # fmt: skip


def say(line: str) -> None:
    print(line, flush=True)


def produce(settings: Settings, count: int) -> float:
    """Produce `count` sentences, record n to partition n % 2 (at offset n // 2); returns
    the seconds it took."""
    producer = Producer(client_config(settings, **{"enable.idempotence": True, "acks": "all"}))
    lines = sentences()
    start = time.perf_counter()
    for n in range(count):
        value = json.dumps({"seq": n, "text": lines[n % len(lines)]}).encode()
        while True:
            try:
                producer.produce(TOPIC, value, str(n).encode(), partition=n % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    return time.perf_counter() - start


@dataclass(frozen=True)
class Timed:
    """One query's run from the topic's start to its end."""

    records: int
    batches: int
    start_s: float  # from start() to the end of the first micro-batch
    steady_per_s: float  # the later batches' records per second
    cpu_s: float  # the whole query's CPU-seconds, this process and Spark's JVM

    def line(self, label: str) -> str:
        return (
            f"{label:<24} {self.records:,} records, {self.batches} batches: start "
            f"{self.start_s:5.1f} s, then {self.steady_per_s:8,.0f} records/s; "
            f"{self.cpu_s:5.1f} CPU-s in all"
        )


def run_to_end(start: Callable[[], Any], cpu: CpuClock) -> Timed:
    """Start a query (`start` returns it), wait for its end, and time it from its progress."""
    began, used = time.time(), cpu()
    query = start()
    query.awaitTermination()
    used = cpu() - used
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    assert progress, "the query read no records"

    def end(p: dict[str, Any]) -> float:
        at = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        return at + p["batchDuration"] / 1000

    later = sum(p["numInputRows"] for p in progress[1:])
    steady = later / (end(progress[-1]) - end(progress[0])) if later else 0.0
    records = sum(p["numInputRows"] for p in progress)
    return Timed(records, len(progress), end(progress[0]) - began, steady, used)


def kafka_stream(spark: SparkSession, settings: Settings) -> DataFrame:
    """The topic as a user reads it without ackfold: the same batches as the spout's."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka.bootstrap_servers)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", settings.kafka.max_offsets_per_trigger)
        .load()
    )


def words_of(text: Any) -> Any:
    """The words of a sentence's text, as the demo splits them."""
    return F.filter(F.split(F.lower(text), NOT_WORD_PATTERN), lambda w: w != "")


def words_of_records(records: DataFrame) -> DataFrame:
    """The untracked pipeline's words: each record's, with its partition and offset."""
    text = F.get_json_object(F.col("value").cast("string"), "$.text")
    return records.select(
        "partition", "offset", F.posexplode(words_of(text)).alias("position", "word")
    )


class Rounds:
    """Fresh tables and checkpoints under `work` for each run of each query."""

    def __init__(self, spark: SparkSession, settings: Settings, work: Path) -> None:
        self.spark, self.settings, self.work = spark, settings, work
        self.runs = 0
        self.cpu = CpuClock(spark)
        self.range_driver_s: list[float] = []  # each probed batch: get and commit its ranges

    def home(self, name: str) -> Path:
        self.runs += 1
        home = self.work / f"{name}-{self.runs}"
        shutil.rmtree(home, ignore_errors=True)
        return home

    def spout(self, name: str) -> tuple[KafkaSpout, Path]:
        home = self.home(name)
        own = self.settings.model_copy(update={"warehouse": str(home)})
        spout = KafkaSpout(self.spark, own, "bench", KafkaTopic(own, TOPIC), to=[SINK])
        return spout, home

    def ingest_tracked(self) -> Timed:
        spout, home = self.spout("ingest-tracked")
        timed = run_to_end(lambda: (
            spout.stream().writeStream.foreachBatch(spout.register)
            .option("checkpointLocation", f"{home}/_checkpoints/spout")
            .trigger(availableNow=True).start()
        ), self.cpu)  # fmt: skip
        roots = self.spark.read.format("delta").load(Ledger(str(home)).path(ROOTS)).count()
        assert roots == timed.records, (roots, timed.records)
        return timed

    def ingest_untracked(self) -> Timed:
        home = self.home("ingest-untracked")
        timed = run_to_end(lambda: (
            kafka_stream(self.spark, self.settings)
            .select("key", "value", "topic", "partition", "offset", "timestamp")
            .writeStream.format("delta")
            .option("checkpointLocation", f"{home}/_checkpoints/records")
            .trigger(availableNow=True).start(f"{home}/records")
        ), self.cpu)  # fmt: skip
        assert self.spark.read.format("delta").load(f"{home}/records").count() == timed.records
        return timed

    def pipeline_tracked(self) -> Timed:
        """Register, split, write the words, ack each root: one query, one pass (the words'
        write gathers the registrations and the acks: `register_one_pass`,
        `explode_acked`)."""
        spout, home = self.spout("pipeline-tracked")
        sink = StageTracker("bench", SINK, ledger=spout.ledger)
        path = f"{home}/words"

        def batch(records: DataFrame, batch_id: int) -> None:
            sentences, registration = spout.register_one_pass(records, batch_id)
            text = F.get_json_object("payload", "$.text")
            words, acks = sink.explode_acked(
                sentences, words_of(text), "word", position="position", to=[]
            )
            words = words.select("attempt", "origin_root_id", "position", "word")
            # A replay-safe sink (docs/decisions/replay-safe-sinks.md): first attempts
            # appended once per batch, later attempts merged on their origin root.
            first = words.where(F.col("attempt") == 1).drop("attempt")
            sink.write_batch(batch_id, outputs={path: first}, roots=registration)
            if registration.replayed:
                later = words.where(F.col("attempt") > 1).drop("attempt")
                dml.merge(path, later.dropDuplicates(list(KEY)), on=ON_KEY,
                          clauses=[INSERT_WORDS])  # fmt: skip
            sink.write_batch(batch_id, events=[acks])

        return self.run_pipeline(spout, home, batch)

    def pipeline_two_pass(self) -> Timed:
        """The same query as ackfold 0.x wrote it: `register` (a job of its own and two
        commits) on the cached batch, the words, then the acks (a third job)."""
        spout, home = self.spout("pipeline-two-pass")
        sink = StageTracker("bench", SINK, ledger=spout.ledger, acks="per_tuple")
        path = f"{home}/words"

        def batch(records: DataFrame, batch_id: int) -> None:
            sentences = spout.register(records.cache(), batch_id)
            text = F.get_json_object("payload", "$.text")
            words = sentences.select(
                "attempt", "origin_root_id", F.posexplode(words_of(text)).alias("position", "word")
            )
            first = words.where(F.col("attempt") == 1).drop("attempt")
            sink.write_batch(batch_id, outputs={path: first})
            if spout.replayed:
                later = words.where(F.col("attempt") > 1).drop("attempt")
                dml.merge(path, later.dropDuplicates(list(KEY)), on=ON_KEY,
                          clauses=[INSERT_WORDS])  # fmt: skip
            sink.write_batch(batch_id, events=[sink.ack(sentences)])
            records.unpersist()

        return self.run_pipeline(spout, home, batch)

    def run_pipeline(
        self, spout: KafkaSpout, home: Path, batch: Callable[[DataFrame, int], None]
    ) -> Timed:
        """Run a tracked pipeline's query to the topic's end; every root must complete."""
        timed = run_to_end(lambda: (
            spout.stream().writeStream.foreachBatch(batch)
            .option("checkpointLocation", f"{home}/_checkpoints/pipeline")
            .trigger(availableNow=True).start()
        ), self.cpu)  # fmt: skip
        events = self.spark.read.format("delta").load(Ledger(str(home)).path(ACK_EVENTS))
        open_roots = events.groupBy("root_id").agg(F.bit_xor("ack_val").alias("x"))
        assert open_roots.count() == timed.records
        assert open_roots.where("x <> 0").isEmpty(), "every root completes"
        return timed

    def pipeline_foreach(self) -> Timed:
        """The untracked query written as a tracked one must be: its words written in
        `foreachBatch`, once per batch (Delta's `txnAppId`/`txnVersion`)."""
        return self.run_foreach("pipeline-foreach", ranges=False)

    def pipeline_ranges(self) -> Timed:
        """A probe of batch ranges, before they are built: `pipeline_foreach`, its write
        observed for each partition's first and last offset and records, and those rows
        appended with delta-rs after the words, one commit a batch with the batch's
        application transaction. What a range costs the batch; no ledger reads them yet."""
        return self.run_foreach("pipeline-ranges", ranges=True)

    def run_foreach(self, name: str, *, ranges: bool) -> Timed:
        home = self.home(name)
        words_path, ranges_path = f"{home}/words", f"{home}/batch_ranges"
        partitions = range(PARTITIONS)
        metrics = []
        for p in partitions:
            inside = F.col("partition") == p
            metrics += [
                F.min(F.when(inside, F.col("offset"))).alias(f"first_{p}"),
                F.max(F.when(inside, F.col("offset"))).alias(f"last_{p}"),
                F.count_if(inside).alias(f"records_{p}"),
            ]
        # Records of a partition added since the query started: none here.
        metrics.append(F.count_if(~F.col("partition").isin(*partitions)).alias("elsewhere"))
        tables: list[DeltaTable] = []

        def batch(records: DataFrame, batch_id: int) -> None:
            observation = Observation(f"ranges-{batch_id}") if ranges else None
            if observation is not None:
                records = records.observe(observation, *metrics)
            (words_of_records(records).write.format("delta").mode("append")
             .option("txnAppId", name).option("txnVersion", batch_id).save(words_path))  # fmt: skip
            if observation is None:
                return
            started = time.process_time()  # the driver's part: this process, delta-rs too
            got = observation.get
            assert got["elsewhere"] == 0, got
            now = datetime.now(UTC)
            rows = [
                {"app": name, "batch_id": batch_id, "source_queue": TOPIC, "partition": p,
                 "first_offset": got[f"first_{p}"], "last_offset": got[f"last_{p}"],
                 "records": got[f"records_{p}"], "committed_at": now}
                for p in partitions if got[f"records_{p}"]
            ]  # fmt: skip
            done = CommitProperties(app_transactions=[Transaction(name, batch_id)])
            data = pa.Table.from_pylist(rows, schema=RANGES)
            if not tables:
                write_deltalake(ranges_path, data, mode="append", commit_properties=done)
                tables.append(DeltaTable(ranges_path))
            else:
                table = tables[0]
                table.update_incremental()
                last = table.transaction_version(name)
                if last is None or last < batch_id:
                    write_deltalake(table, data, mode="append", commit_properties=done)
            self.range_driver_s.append(time.process_time() - started)

        timed = run_to_end(lambda: (
            kafka_stream(self.spark, self.settings).writeStream.foreachBatch(batch)
            .option("checkpointLocation", f"{home}/_checkpoints/words")
            .trigger(availableNow=True).start()
        ), self.cpu)  # fmt: skip
        if ranges:  # the batches of each partition tile its offsets, every record once
            rows = DeltaTable(ranges_path).to_pyarrow_table().to_pylist()
            assert sum(row["records"] for row in rows) == timed.records, rows
            for p in partitions:
                spans = sorted((r["first_offset"], r["last_offset"]) for r in rows
                               if r["partition"] == p)  # fmt: skip
                assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans)), (p, spans)
        return timed

    def pipeline_untracked(self) -> Timed:
        home = self.home("pipeline-untracked")
        timed = run_to_end(lambda: (
            words_of_records(kafka_stream(self.spark, self.settings))
            .writeStream.format("delta")
            .option("checkpointLocation", f"{home}/_checkpoints/words")
            .trigger(availableNow=True).start(f"{home}/words")
        ), self.cpu)  # fmt: skip
        return timed


def compare(name: str, tracked: list[Timed], untracked: list[Timed]) -> dict[str, Any]:
    """The medians of the rounds, and the tracked steady rate as a share of the untracked."""
    median: dict[str, float] = {}
    for label, runs in (("tracked", tracked), ("untracked", untracked)):
        median[f"{label}_per_s"] = statistics.median(t.steady_per_s for t in runs)
        median[f"{label}_start_s"] = statistics.median(t.start_s for t in runs)
        median[f"{label}_cpu_s"] = statistics.median(t.cpu_s for t in runs)
    share = median["tracked_per_s"] / median["untracked_per_s"]
    say(f"{name}: steady state, tracked {median['tracked_per_s']:,.0f} records/s = {share:.0%} "
        f"of untracked {median['untracked_per_s']:,.0f}/s (overhead {1 - share:.0%}); start "
        f"{median['tracked_start_s']:.1f} s against {median['untracked_start_s']:.1f} s; "
        f"CPU-s in all {median['tracked_cpu_s']:.1f} against {median['untracked_cpu_s']:.1f} "
        f"(x{median['tracked_cpu_s'] / median['untracked_cpu_s']:.2f}) (median of "
        f"{len(tracked)})")  # fmt: skip
    return {
        **{k: per_second(v) if k.endswith("per_s") else round(v, 2) for k, v in median.items()},
        "tracked_share": round(share, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=220_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--batch", type=int, default=10_000, help="kafka.max_offsets_per_trigger: records a batch"
    )
    parser.add_argument("--replays", type=int, default=10_000)
    parser.add_argument("--payload", type=int, default=200, help="replayed values' padding")
    parser.add_argument("--warmup", type=int, default=0, help="rounds run first, not counted")
    parser.add_argument("--queries", default=",".join(QUERIES),
                        help=f"which to time, comma-separated: {', '.join(QUERIES)}")  # fmt: skip
    args = parser.parse_args()
    queries = [q for q in args.queries.split(",") if q]
    unknown = sorted(set(queries) - set(QUERIES))
    if unknown or not queries:
        parser.error(f"--queries: {', '.join(unknown) or 'none given'}; choose from "
                     f"{', '.join(QUERIES)}")  # fmt: skip
    assert args.replays <= args.records // PARTITIONS, "a replay re-reads partition 0"
    assert args.records >= 2 * args.batch, "a steady state needs batches after the first"
    work = Path(tempfile.mkdtemp(prefix="ackfold-bench-kafka-"))
    port = free_port()
    settings = load_settings(
        var_dir=work, jars_dir=load_settings().jars_dir,
        kafka={"bootstrap_servers": f"127.0.0.1:{port}", "partitions": PARTITIONS,
               "max_offsets_per_trigger": args.batch},
        defaults={"replay_rate": 100_000},
    )  # fmt: skip
    results: dict[str, Any] = {"records": args.records, "replays": args.replays,
                               "batch": args.batch}  # fmt: skip
    spark = get_spark(settings, app_name="ackfold-bench-kafka")
    with KafkaBroker(settings, port=port, data_dir=work / "kafka", topics=[TOPIC]):
        seconds = produce(settings, args.records)
        results["produce_per_s"] = per_second(args.records / seconds)
        say(f"confluent-kafka produce alone: {args.records:,} records in {seconds:.1f} s "
            f"= {args.records / seconds:,.0f}/s")  # fmt: skip

        rounds = Rounds(spark, settings, work)
        runs: dict[str, list[Timed]] = {}
        names = list(dict.fromkeys(name for query in queries for name in QUERIES[query]))
        for turn in range(args.warmup + args.rounds):
            # The order rotated each round: no query always takes the same moment.
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                timed = getattr(rounds, name)()
                assert timed.records == args.records, (name, timed)
                counted = turn >= args.warmup
                say(timed.line(name.replace("_", ", ")) + ("" if counted else " (warm-up)"))
                if counted:
                    runs.setdefault(name, []).append(timed)
        for query in queries:
            tracked, untracked = QUERIES[query]
            results[query] = compare(query, runs[tracked], runs[untracked])
        if rounds.range_driver_s:
            driver_ms = statistics.median(rounds.range_driver_s) * 1000
            results["ranges_driver_ms"] = round(driver_ms, 1)
            say(
                f"ranges probe, the driver's part a batch (the observation's row, the delta-rs "
                f"commit): {driver_ms:.1f} ms CPU (median of {len(rounds.range_driver_s)})"
            )

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
