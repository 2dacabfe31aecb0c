"""The spout stage of an app that reads Kafka: Spark's Kafka source, one root per record.

Spark reads the topics itself (`spark-sql-kafka-0-10`), so there is no ingest loop as
for SQS. Inside the app's first `foreachBatch`, `KafkaSpout.register` writes a `roots`
row and an `init` event per record before the stage does anything else, and Spark
records the batch's offsets in its checkpoint only once `foreachBatch` returns: offsets
advance only after the roots are registered, and nothing is committed to Kafka. A batch
that dies midway is run again from the same offsets: it derives the same root ids, and
finds them registered (its commits carry the batch's Delta application transaction), so
a record no fault re-delivers is registered once.
A batch's registration costs one Spark job, which brings each record's root and init
event to the driver, not its value.

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
from ackfold.ledger.commits.driver_writers import driver_writer
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.ledger.setup.create import create_tables
from ackfold.sources.base import ATTEMPT, ORIGIN_ROOT_ID
from ackfold.sources.kafka import KafkaTopic
from ackfold.sources.kafka_client import check_topics, client_config, topic_ids
from ackfold.sources.kafka_security import spark_security
from ackfold.track.registration import Registration, observe_registration
from ackfold.track.spout import INIT_COLUMNS, Spout, register_roots, split_rows
from ackfold.track.stage import StageTracker
from ackfold.track.write import append_rows, batch_writer, query_name

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SPOUT_STAGE = "spout"
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
        self.registered = 0  # roots registered by this process
        # Roots of attempt 2 or more in the batch `register` took last: where a sink that
        # appends first attempts must merge (docs/decisions/replay-safe-sinks.md).
        self.replayed = 0
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
        `_ackfold`. `batch_id` is the micro-batch's: a re-run of the batch writes nothing
        again (the commits carry it as their Delta application transaction).

        One Spark job derives each record's root and init event (`StageTracker.spout`'s
        ids, in Spark) and brings them to the driver, which commits them before this
        returns; the values stay in Spark unless `kafka.store_payload` keeps them. The
        tuples are derived from the records again where the stage uses them (cache the
        batch if it is read more than once). A query that writes its outputs in the same
        batch saves that job with `register_one_pass`."""
        from pyspark.sql import functions as F

        spouted = self._spouted(records)
        rows = spouted.rows
        if not self.settings.kafka.store_payload:
            # A replay re-reads the record: the ledger keeps its position, not its value.
            rows = rows.withColumn("payload", F.lit(None).cast("string"))
        roots, events = split_rows(rows.toArrow(), app=self.app, stage=SPOUT_STAGE)
        self.replayed = sum(1 for attempt in roots.column("attempt").to_pylist() if attempt > 1)
        # Durable before foreachBatch returns, so before Spark records the batch's offsets;
        # once: a batch run again (its query died before its offsets were committed)
        # finds its transaction done, and the registrations are not written twice.
        spark = records.sparkSession
        writer = batch_writer(spark, batch_id, app=self.app, stage=SPOUT_STAGE,
                              query=self.tracker.query)  # fmt: skip
        if append_rows(spark, self.ledger, roots=roots, events=events, writer=writer):
            self.registered += roots.num_rows
        # The tuples hold the copies of a record delivered twice in the batch: a stage's
        # acks take copies of a tuple as one.
        return self.tracker.registered(spouted.roots, to=self.to)

    def register_one_pass(
        self, records: DataFrame, batch_id: int
    ) -> tuple[DataFrame, Registration]:
        """The tuples of one micro-batch of `stream()` (as `register` returns them), and
        their `Registration`: the roots and init events that the job writing the batch's
        outputs gathers, with no Spark job of their own (`ackfold.track.registration`).

        Pass the registration to `write_batch(roots=...)` in the call that writes the
        outputs: it commits the roots after them (once: with the batch's Delta application
        transaction, as `register`), then the init events with the batch's events. Read
        the tuples no other way before that write (a `count()`, an `isEmpty()`): the rows
        would be computed again. Every record is registered, the ones the stage filters
        out too. `Registration.replayed` counts the batch's roots of attempt 2 or more once
        the outputs are written."""
        spark = records.sparkSession
        spouted = self._spouted(records)
        watched, registration = observe_registration(
            spouted.rows,
            app=self.app,
            stage=SPOUT_STAGE,
            source=KafkaTopic.source,
            id_scheme=self.tracker.roots_scheme(spark),
            keep_payload=self.settings.kafka.store_payload,
        )
        registration.writer = batch_writer(spark, batch_id, app=self.app, stage=SPOUT_STAGE,
                                           query=self.tracker.query)  # fmt: skip
        registration.on_commit = self._count
        tuples = watched.drop(*INIT_COLUMNS)
        return self.tracker.registered(tuples, to=self.to), registration

    def _count(self, roots: int) -> None:
        self.registered += roots

    def _spouted(self, records: DataFrame) -> Spout:
        """`register_roots` of the batch's records: their roots rows and init events, each
        record's root id from its position (attempt 1) or its replay headers."""
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
        )
        # A record delivered twice in one batch (two replays of one attempt) is one root:
        # its copies are dropped from the rows the driver collects, not by a shuffle.
        return register_roots(
            self.app,
            SPOUT_STAGE,
            batch,
            message_id="message_id",
            source=KafkaTopic.source,
            source_queue=F.col("topic"),
            attempt="attempt",
            origin_root_id="origin_root_id",
            payload="payload",
            source_position="source_position",
            to=self.to,
            id_scheme=self.tracker.roots_scheme(records.sparkSession),
            distinct=False,
        )
