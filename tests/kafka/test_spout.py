"""`KafkaSpout.register` against the real broker: the roots, init events and tuples of a
micro-batch, derived on the driver in one pass, are those `StageTracker.spout` derives
in Spark from the same records, and they are in the ledger when `register` returns
(before Spark can record the batch's offsets)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackfold.config import Settings
from ackfold.ledger.schema import ids
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.sources.base import ATTEMPT, ORIGIN_ROOT_ID
from ackfold.sources.kafka import KafkaTopic
from ackfold.sources.kafka_client import topic_ids
from ackfold.sources.kafka_records import message_id
from ackfold.sources.kafka_spout import SPOUT_STAGE, KafkaSpout
from ackfold.track.stage import StageTracker
from tests.kafka.conftest import produce

APP = "wordcount"


def records_of(spark: SparkSession, settings: Settings, topic: str) -> DataFrame:
    """The topic's records as Spark's Kafka source gives a micro-batch of them."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )


def without(rows: list[Any], *columns: str) -> list[dict[str, Any]]:
    kept = [{k: v for k, v in r.asDict().items() if k not in columns} for r in rows]
    return sorted(kept, key=lambda r: (r["root_id"], json.dumps(r, default=str)))


def test_register_writes_what_the_stage_tracker_derives_before_it_returns(
    spark: SparkSession, kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    tid = topic_ids(kafka_settings, [topic])[topic]
    origin = ids.root_id(APP, f"kafka:{topic}:{message_id(tid, 0, 0)}")
    replay = [(ATTEMPT, b"2"), (ORIGIN_ROOT_ID, str(origin).encode())]
    offsets = produce(
        kafka_settings, topic,
        [(b"0", b"first", []), (b"1", b"second", []),
         (b"r", b"again", replay), (b"r", b"again", replay),  # one attempt sent twice
         (b"t", None, [])],  # a tombstone
    )  # fmt: skip
    spout = KafkaSpout(spark, kafka_settings, APP, KafkaTopic(kafka_settings, topic), to=["split"])
    ledger = Ledger(kafka_settings.table_root)

    tuples = spout.register(records_of(spark, kafka_settings, topic), 0)

    # Durable on return: read straight from the tables, nothing else ran in between.
    roots = spark.read.format("delta").load(ledger.path(ROOTS)).collect()
    events = spark.read.format("delta").load(ledger.path(ACK_EVENTS)).collect()
    assert spout.registered == 4
    assert len(roots) == len(events) == 4, "the attempt delivered twice is one root"

    # The same records through StageTracker.spout, as register derived them before.
    is_replay = F.col("offset").isin(offsets[2], offsets[3])
    frame = records_of(spark, kafka_settings, topic).select(
        F.col("topic"),
        F.concat_ws(":", "partition", "offset").alias("at"),
        F.concat_ws(":", "topic", "partition", "offset").alias("position"),
        F.col("value").cast("string").alias("payload"),
        F.when(is_replay, F.lit(2)).otherwise(F.lit(1)).alias("attempt"),
        F.when(is_replay, F.lit(origin)).cast("bigint").alias("origin"),
    )
    stage = StageTracker(APP, SPOUT_STAGE)
    expected = stage.spout(
        frame.withColumn("message_id", F.concat("at", F.lit(f"@{tid}"))),
        message_id="message_id",
        source="kafka",
        source_queue=F.col("topic"),
        attempt="attempt",
        origin_root_id="origin",
        payload="payload",
        source_position="position",
        to=["split"],
    )
    want_roots = expected.roots.withColumn("payload", F.lit(None).cast("string"))
    assert without(roots, "ingested_at") == without(want_roots.collect(), "ingested_at")
    assert without(events, "event_time") == without(expected.events.collect(), "event_time")
    # The tuples it returned before: the roots' columns, the record's value (the stage
    # parses it) and the same _ackfold.
    old = stage.registered(expected.roots, to=["split"])
    assert tuples.columns == old.columns
    got = {r["root_id"]: (r["payload"], r["_ackfold"]) for r in tuples.collect()}
    want = {r["root_id"]: (r["payload"], r["_ackfold"]) for r in old.collect()}
    assert len(got) == 4
    assert got == want
    assert sorted(p for p, _ in got.values() if p is not None) == ["again", "first", "second"]


def test_a_batch_run_again_after_its_query_died_registers_each_record_once(
    spark: SparkSession, kafka_settings: Settings, make_topic: Callable[[], str]
) -> None:
    """A query that dies after `register`, before its offsets are committed, runs the
    batch again from the same offsets when it restarts: the batch's commits carry its
    Delta application transaction, so the re-run writes no second registration (the demo
    on Kafka once reported every message of a killed batch as a duplicate)."""
    from pyspark.errors import StreamingQueryException

    from ackfold.sources.kafka_spout import restart_gets_past

    topic = make_topic()
    produce(kafka_settings, topic, [(b"k", f"v{i}".encode(), []) for i in range(5)])
    spout = KafkaSpout(spark, kafka_settings, APP, KafkaTopic(kafka_settings, topic), to=["split"])
    batches: list[int] = []

    def register_then_die_once(records: DataFrame, batch_id: int) -> None:
        spout.register(records, batch_id).collect()
        batches.append(batch_id)
        if len(batches) == 1:
            raise RuntimeError("killed after registering")

    for _ in range(4):
        query = (
            spout.stream().writeStream.foreachBatch(register_then_die_once)
            .option("checkpointLocation", f"{kafka_settings.table_root}/_checkpoints/spout")
            .trigger(availableNow=True).start()
        )  # fmt: skip
        try:
            query.awaitTermination()
            break
        except StreamingQueryException as exc:
            if "killed after registering" not in str(exc) and not restart_gets_past(exc):
                raise
    assert batches[:2] == [0, 0], "the batch ran again"
    ledger = Ledger(kafka_settings.table_root)
    roots = spark.read.format("delta").load(ledger.path(ROOTS))
    events = spark.read.format("delta").load(ledger.path(ACK_EVENTS))
    assert (roots.count(), events.count()) == (5, 5)
    assert roots.select("root_id").distinct().count() == 5
    assert spout.registered == 5


def jobs_of(spark: SparkSession, group: str, action: Callable[[], Any]) -> int:
    """The Spark jobs `action` ran (each in job group `group`)."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return len(context.statusTracker().getJobIdsForGroup(group))


def test_one_pass_registers_what_register_does_in_the_job_that_writes_the_outputs(
    spark: SparkSession, kafka_settings: Settings, make_topic: Callable[[], str], tmp_path: Any
) -> None:
    """`register_one_pass`: no job of its own. The batch's one write of its outputs
    gathers the roots and init events; `write_batch(roots=...)` commits them after the
    outputs, the same rows `register` commits (the time aside), a record the stage filters
    out too, and the replay counted."""
    topic = make_topic()
    tid = topic_ids(kafka_settings, [topic])[topic]
    origin = ids.root_id(APP, f"kafka:{topic}:{message_id(tid, 0, 0)}")
    replay = [(ATTEMPT, b"2"), (ORIGIN_ROOT_ID, str(origin).encode())]
    produce(
        kafka_settings, topic,
        [(b"0", b"first", []), (b"1", b"second", []), (b"r", b"again", replay),
         (b"r", b"again", replay), (b"t", None, [])],
    )  # fmt: skip
    records = records_of(spark, kafka_settings, topic)
    one_pass = KafkaSpout(
        spark, kafka_settings, APP, KafkaTopic(kafka_settings, topic), to=["sink"]
    )
    sink = StageTracker(APP, "sink", ledger=one_pass.ledger)

    def untracked() -> None:
        records.select(F.col("value").cast("string").alias("text")).write.format("delta").save(
            str(tmp_path / "untracked")
        )

    def tracked() -> None:
        tuples, registration = one_pass.register_one_pass(records, 0)
        # The stage writes only the records with a value: the tombstone is registered too.
        texts = tuples.where(F.col("payload").isNotNull()).select(
            F.col("payload").alias("text"), "root_id"
        )
        sink.write_batch(0, outputs={str(tmp_path / "texts"): texts}, roots=registration)
        assert registration.replayed == 1

    assert jobs_of(spark, "one-pass", tracked) == jobs_of(spark, "untracked", untracked)
    assert one_pass.registered == 4
    texts = spark.read.format("delta").load(str(tmp_path / "texts"))
    assert sorted(r.text for r in texts.collect()) == ["again", "again", "first", "second"]

    # The same records through `register`, into a ledger of their own.
    two_pass_settings = kafka_settings.model_copy(update={"warehouse": str(tmp_path / "two")})
    two_pass = KafkaSpout(
        spark, two_pass_settings, APP, KafkaTopic(two_pass_settings, topic), to=["sink"]
    )
    two_pass.register(records, 0)

    def read(ledger: Ledger, name: str) -> list[Any]:
        return spark.read.format("delta").load(ledger.path(name)).collect()

    for name, stamped in ((ROOTS, "ingested_at"), (ACK_EVENTS, "event_time")):
        got, want = read(one_pass.ledger, name), read(two_pass.ledger, name)
        assert len(got) == 4, name
        assert without(got, stamped) == without(want, stamped), name


def test_one_pass_run_again_or_read_early_registers_each_record_once(
    spark: SparkSession,
    kafka_settings: Settings,
    make_topic: Callable[[], str],
    tmp_path: Any,
    caplog: Any,
) -> None:
    """A batch run again after its outputs and roots were committed writes no output and
    observes nothing: its registration is computed again, and its roots' commit is found
    done. Tuples read before the outputs' write (their observation then holds what that
    read saw, a part of the batch) get the same rows, computed again, with a warning."""
    topic = make_topic()
    produce(kafka_settings, topic, [(b"k", f"v{i}".encode(), []) for i in range(5)])
    records = records_of(spark, kafka_settings, topic)
    spout = KafkaSpout(spark, kafka_settings, APP, KafkaTopic(kafka_settings, topic), to=["sink"])
    sink = StageTracker(APP, "sink", ledger=spout.ledger)
    output = str(tmp_path / "values")

    def batch(*, read_early: bool) -> None:
        tuples, registration = spout.register_one_pass(records, 0)
        if read_early:
            assert not tuples.isEmpty()  # one row is enough for it: a partial observation
        values = tuples.select("root_id", "payload")
        sink.write_batch(0, outputs={output: values}, roots=registration)

    batch(read_early=True)
    assert "read before write_batch" in caplog.text
    batch(read_early=False)  # the same batch again: its outputs' write is skipped

    roots = spark.read.format("delta").load(spout.ledger.path(ROOTS))
    events = spark.read.format("delta").load(spout.ledger.path(ACK_EVENTS))
    assert roots.count() == 5, "each record registered once"
    assert spout.registered == 5
    assert events.select("event_id").distinct().count() == 5
    assert spark.read.format("delta").load(output).count() == 5
