"""The spout stage of an app that reads Kafka: Spark's Kafka source, one root per record.

Spark reads the topics itself (`spark-sql-kafka-0-10`), so there is no ingest loop as
for SQS. Inside the app's first `foreachBatch`, `KafkaSpout.register` writes a `roots`
row and an `init` event per record before the stage does anything else, and Spark
records the batch's offsets in its checkpoint only once `foreachBatch` returns: offsets
advance only after the roots are registered, and nothing is committed to Kafka. A batch
that dies midway is run again from the same offsets, and registers the same root ids.
A batch costs one Spark job: its records come to the driver once, and the roots, the
init events and the tuples are all made from them there.

- A record's root id comes from `kafka:<topic>:<partition>:<offset>@<topic id>` on
  attempt 1 (its `roots.source_message_id` is `<partition>:<offset>@<topic id>`): a topic
  deleted and created again has a new id, so its records get new root ids although its
  offsets start over. The ids are looked up once per micro-batch (one metadata request).
  A replayed record carries `origin_root_id` and `attempt` headers, and its id comes from
  those (`ids.root_id`), wherever in which topic it lands.
- `roots.source_position` is `topic:partition:offset`; `roots.payload` stays empty
  unless `kafka.store_payload` is set, because a replay re-reads the record.
- Headers that are not a valid attempt (a number of at least 2 with an origin id) are
  ignored: the record counts as a new message, never as nobody's.

Example (an app whose first stage is `split`):
    >>> spout = KafkaSpout(spark, settings, "wordcount", KafkaTopic(settings, "lines"),
    ...                    to=["split"])                                # doctest: +SKIP
    >>> def split_batch(frame, batch_id):
    ...     sentences = spout.register(frame, batch_id)  # roots rows + _ackfold
    ...     ...
    >>> spout.stream().writeStream.foreachBatch(split_batch)...start()  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings
from ackfold.ledger.contract import arrow_schema
from ackfold.ledger.create import create_tables
from ackfold.ledger.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.ledger.writer import driver_writer
from ackfold.sources.base import ATTEMPT, ORIGIN_ROOT_ID
from ackfold.sources.kafka import KafkaTopic
from ackfold.sources.kafka_client import check_topics, client_config, topic_ids
from ackfold.sources.kafka_security import spark_security
from ackfold.track.stage import StageTracker
from ackfold.track.tracker import Tracker
from ackfold.track.write import append_rows, query_name

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SPOUT_STAGE = "spout"
# The columns `register` reads each record as, in the order its loop takes them.
_RECORD_COLUMNS = (
    "topic", "message_id", "source_position", "payload", "attempt", "origin_root_id"
)  # fmt: skip
# SPARK-55271: Spark 4.1.1's Kafka source fails the progress report that follows a batch
# re-run on restart (a batch in the offset log, not yet in the commit log). The batch has
# run and committed by then; restarting the query once more gets past it.
_SPARK_55271 = 'because the return value of "scala.Option.get()" is null'


def restart_gets_past(error: BaseException) -> bool:
    """Whether a streaming query that died of `error` just needs starting again: Spark
    4.1.1's Kafka source bug SPARK-55271 (fixed in 4.1.3), after a batch re-run."""
    return _SPARK_55271 in str(error)


class KafkaSpout:
    """Registers the records of `topic` (and of its retry topic) as roots of `app`."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        app: str,
        topic: KafkaTopic,
        *,
        to: Sequence[str] | None = None,
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.topic = topic
        self.to = tuple(to) if to is not None else None
        self.ledger = Ledger(settings.table_root)
        # It writes inside the query of the first stage it feeds (Spark Connect finds that
        # query by name).
        self.tracker = StageTracker(
            app,
            SPOUT_STAGE,
            ledger=self.ledger,
            query=query_name(app, self.to[0]) if self.to else None,
        )
        self.app = self.tracker.app
        self.registered = 0  # records registered by this process (a re-run batch counts again)
        self._admin: Any = None  # the admin client that looks up the topic ids, made once

    def __getstate__(self) -> dict[str, Any]:
        # Under Spark Connect `register` runs on a copy of this object in a Python worker
        # of the server, on the batch's session: no client session, topic or admin client.
        state = self.__dict__.copy()
        for client in ("spark", "topic"):
            state.pop(client, None)
        state["_admin"] = None
        return state

    @property
    def topics(self) -> list[str]:
        return sorted({self.topic.queue, self.topic.retry_topic})

    def check(self) -> None:
        """`SourceError` at start-up if a topic is missing or Kafka does not answer."""
        where = f"apps.{self.app}"
        named = {self.topic.queue: f"{where}.source_queue"}
        if self.topic.retry_topic != self.topic.queue:
            named[self.topic.retry_topic] = f"{where}.retry_queue"
        check_topics(self.settings, named)

    def stream(self) -> DataFrame:
        """The app's topics as a streaming DataFrame of Kafka records, from the earliest
        offsets on a new checkpoint (records sent before the app first started count)."""
        # By the delta-rs writer that commits the roots where there is one: no Spark job.
        writer = driver_writer(self.spark, self.ledger)
        create_tables(self.spark, self.ledger, (ACK_EVENTS, ROOTS), writer=writer)
        kafka = self.settings.kafka
        return (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", ",".join(self.topics))
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .option("maxOffsetsPerTrigger", kafka.max_offsets_per_trigger)
            .options(**spark_security(self.settings))
            .load()
        )

    def register(self, records: DataFrame, batch_id: int) -> DataFrame:
        """Write the roots and init events of one micro-batch of `stream()` and return its
        tuples: `roots` columns, `payload` always filled (the record's value as text), and
        `_ackfold`. A re-run batch registers the same roots again (`batch_id` is the
        micro-batch's; its rows are idempotent by their ids).

        One pass: the batch's one Spark job reads the records to the driver (Arrow); a
        `Tracker` derives their roots and init events there (the ids `StageTracker.spout`
        derives in Spark), which are committed before this returns; the tuples are made
        from the same rows, so the stage never reads Kafka again."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        def header(name: str) -> Column:
            matching = F.filter("headers", lambda h: h["key"] == F.lit(name))
            return F.try_element_at(matching, F.lit(-1))["value"].cast("string")

        attempt = header(ATTEMPT).try_cast("int")
        origin = header(ORIGIN_ROOT_ID).try_cast("bigint")
        replayed = (attempt >= 2) & origin.isNotNull()
        # Looked up per batch, not once: a topic re-created while the app ran has a new id.
        # The client is kept: making one costs more than the lookup.
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(client_config(self.settings))
        ids = topic_ids(self.settings, self.topics, admin=self._admin)
        topic_id = F.create_map(*[F.lit(x) for pair in sorted(ids.items()) for x in pair])
        batch = records.select(
            F.col("topic"),
            F.concat(
                F.concat_ws(":", "partition", "offset"), F.lit("@"), topic_id[F.col("topic")]
            ).alias("message_id"),
            F.concat_ws(":", "topic", "partition", "offset").alias("source_position"),
            F.col("value").cast("string").alias("payload"),
            F.when(replayed, attempt).otherwise(F.lit(1)).alias("attempt"),
            F.when(replayed, origin).alias("origin_root_id"),
        ).toArrow()
        tracker = Tracker(self.app)
        columns = [batch.column(name).to_pylist() for name in _RECORD_COLUMNS]
        for topic, message, position, payload, tries, origin_id in zip(*columns, strict=True):
            # A record delivered twice in one batch (two replays of one attempt) is one root.
            tracker.spout(
                message,
                stage=SPOUT_STAGE,
                source=KafkaTopic.source,
                source_queue=topic,
                attempt=tries,
                origin_root_id=origin_id,
                payload=payload,
                source_position=position,
                to=self.to,
            )
        roots = pa.Table.from_pylist(tracker.drain_roots(), schema=arrow_schema(ROOTS))
        events = pa.Table.from_pylist(tracker.drain(), schema=arrow_schema(ACK_EVENTS))
        stored = roots
        if not self.settings.kafka.store_payload:
            # A replay re-reads the record: the ledger keeps its position, not its value.
            payload = roots.schema.get_field_index("payload")
            stored = roots.set_column(payload, "payload", pa.nulls(roots.num_rows, pa.string()))
        # Durable before foreachBatch returns, so before Spark records the batch's offsets.
        spark = records.sparkSession
        append_rows(spark, self.ledger, roots=stored, events=events)
        self.registered += batch.num_rows
        return self.tracker.registered(spark.createDataFrame(roots), to=self.to)
