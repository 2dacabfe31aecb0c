"""The word-count topology as tracked Spark streaming apps: ackfold's reference app.

    SQS ──ingest──▶ roots ──split query──▶ words (Delta) ──count query──▶ counted (Delta)
    Kafka ─────────split query (spout + split)──▶ words (Delta) ──count query──▶ counted

- The source is `apps.wordcount.source`: `sqs` (the default) or `kafka`.
- On SQS the spout is the ingester (`ackfold.sources.ingest`): messages become roots in Delta,
  and `split` reads the registered roots. On Kafka, `split` reads the topic with Spark's
  Kafka source and registers each micro-batch's records first (`ackfold.sources.kafka_spout`).
- `split` emits one tuple per word anchored to its sentence, and writes them to the
  `words` Delta table: the word, its position, its sentence's origin root and `_ackfold`,
  no more than the sink needs and ackfold requires. Its acks and fails are gathered by
  the job that writes the words (`explode_acked`): one pass over the batch, no cache.
- `count` is another streaming query: it reads `words` as a Delta stream, so lineage is
  tracked across jobs, and acks each word once it is in the sink.
- The sink, `counted`, declared as the app's output (`ackfold.effects`) beside `words`,
  holds one row per word occurrence, keyed on (origin root, position): a replayed
  sentence writes the same keys again and MERGE inserts only what is missing, so the
  counts (`word_counts`) stay exact under replays and partial attempts, and what a dead
  letter left there is found, and retracted, by its origin.
  That key is the one thing a replay-safe sink needs from ackfold: the origin root, the
  same on every attempt (where an untracked app would key on its source's message id).
- The fault keys of `count` (the sentence's `seq`, its `attempt`) go into `words` only
  when `count` has faults to draw, or stuck messages (whose outage strikes at `count`).

`WordCount.step()` runs each query to the end of its input (`availableNow`), which is how
the demo drives it in reproducible cycles; `start()` runs it continuously.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import Settings
from ackfold.config.demo import DEMO_APP_POLICY, FaultSettings, with_app_defaults
from ackfold.demo.faults import Killer, be_slow, hit
from ackfold.demo.feed import NOT_WORD_PATTERN
from ackfold.demo.queries import run_to_end, start_stage
from ackfold.ledger.commits import dml
from ackfold.ledger.schema.tables import ROOTS, Ledger
from ackfold.ledger.setup.create import create_tables
from ackfold.sources.base import SourceQueue
from ackfold.sources.ingest import Ingester
from ackfold.sources.kafka import KafkaTopic
from ackfold.sources.kafka_spout import KafkaSpout
from ackfold.sources.sqs import SqsQueue
from ackfold.spark.frames import local_frame
from ackfold.track.compact import COMPACT
from ackfold.track.heartbeat import install_heartbeat, remove_heartbeat
from ackfold.track.stage import StageTracker
from ackfold.track.write import query_name

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from ackfold.track.registration import Registration

log = logging.getLogger("ackfold.demo")

APP: Final = "wordcount"
QUEUE: Final = "wordcount-sentences"
SPLIT: Final = "split"
COUNT: Final = "count"
STAGES: Final = (SPLIT, COUNT)

_BODY = "seq INT, text STRING"
_COUNTED = "origin_root_id BIGINT, position INT, word STRING"
_COUNTED_COLUMNS = ("origin_root_id", "position", "word")
# Named, not `INSERT *`: a sink made by an older demo may have more columns.
_INSERT_WORDS = (
    "WHEN NOT MATCHED THEN INSERT (origin_root_id, position, word) "
    "VALUES (s.origin_root_id, s.position, s.word)"
)


def with_demo_policy(settings: Settings, app: str = APP) -> Settings:
    """`settings` with the demo app's policy filled in where `apps.<app>` leaves it unset
    (already so for `wordcount`, by default; this applies it to an app of another name)."""
    return settings.model_copy(
        update={"apps": with_app_defaults(settings.apps, app, DEMO_APP_POLICY)}
    )


def kafka_topic(settings: Settings, app: str = APP) -> KafkaTopic:
    """The app's source topic as its policy names it (`source_queue`, `retry_queue`,
    `dead_letter_queue`), with the demo's names where it names none."""
    overrides = settings.apps.get(app) or DEMO_APP_POLICY
    return KafkaTopic(
        settings,
        overrides.source_queue or QUEUE,
        dead_letter_queue=overrides.dead_letter_queue,
        retry_topic=overrides.retry_queue,
    )


def demo_topics(settings: Settings) -> list[str]:
    """The word count's topics: source, retry (if set) and dead letters."""
    topic = kafka_topic(settings)
    return sorted({topic.queue, topic.retry_topic, topic.dead_letter_queue})


def _tokens() -> Column:
    """The words of a parsed sentence (`doc.text`), lowercased, in order."""
    from pyspark.sql import functions as F

    return F.filter(F.split(F.lower("doc.text"), NOT_WORD_PATTERN), lambda w: w != "")


class WordCount:
    """One word-count app: its ingester, its two queries, and its tables."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        *,
        app: str = APP,
        faults: FaultSettings | None = None,
        stuck: Collection[int] = (),
        acks: str = COMPACT,
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.app = app
        overrides = settings.apps.get(app) or DEMO_APP_POLICY
        self.stages = overrides.stages or STAGES
        if tuple(self.stages) != STAGES:
            raise ValueError(f"apps.{app}.stages must be {', '.join(STAGES)} for the word count")
        self.faults = faults or FaultSettings()
        unknown = sorted(self.faults.stages() - set(STAGES))
        if unknown:
            raise ValueError(
                f"faults name unknown stage(s) {', '.join(unknown)}; the word count's stages "
                f"are {', '.join(STAGES)}"
            )
        self.source = overrides.source or SqsQueue.source
        self.ledger = Ledger(settings.table_root)
        self.queue: SourceQueue
        self.ingester: Ingester | None = None
        self.kafka: KafkaSpout | None = None
        if self.source == KafkaTopic.source:
            self.queue = kafka_topic(settings, app)
            self.kafka = KafkaSpout(spark, settings, app, self.queue, to=[SPLIT])
            self.kafka.check()  # a missing topic is an error now, not a silent wait
            spout = self.kafka.tracker
        else:
            queue = overrides.source_queue or QUEUE
            if queue.endswith(".fifo"):
                raise ValueError(
                    f"apps.{app}.source_queue is {queue!r}: the word count reads a standard "
                    "queue (its feed sends no message group ids)"
                )
            sqs = SqsQueue(settings, queue, dead_letter_queue=overrides.dead_letter_queue)
            self.queue = sqs
            self.ingester = Ingester(spark, settings, app, sqs, to=[SPLIT])
            spout = self.ingester.tracker
        self.spout = spout
        # `acks`: how the stages write their acks (`ackfold.track.compact`); the benchmark
        # runs the per-tuple mode too, for comparison.
        self.split = StageTracker(app, SPLIT, ledger=self.ledger, acks=acks)
        self.count = StageTracker(app, COUNT, ledger=self.ledger, acks=acks)
        home = f"{settings.table_root}/apps/{app}"
        self.words_path = f"{home}/words"
        self.counted_path = f"{home}/counted"
        self.checkpoints = f"{settings.table_root}/_checkpoints/apps/{app}"
        self.killer = Killer(self.faults)
        # The feed's stuck seqs fail on every attempt the automatic replay may send.
        self.stuck = sorted(stuck)
        self.max_attempts = settings.app(app).max_attempts
        self.queries: list[StreamingQuery] = []
        self.restarts = 0
        self._create_tables()

    def __getstate__(self) -> dict[str, Any]:
        # Under Spark Connect a stage's batches run on a copy of this object, in a Python
        # worker of the server: it takes the stages and their faults, not the clients.
        state = self.__dict__.copy()
        for client in ("spark", "ingester", "queue", "queries"):
            state.pop(client, None)
        return state

    # -- the two stages ---------------------------------------------------------------

    def _split_batch(
        self, frame: DataFrame, batch_id: int, registration: Registration | None = None
    ) -> None:
        from pyspark.sql import functions as F

        be_slow(self.faults, SPLIT)
        rows = frame.withColumn("doc", F.from_json("payload", _BODY))
        seq = F.col("doc.seq")
        parsed = seq.isNotNull() & F.col("doc.text").isNotNull()
        dropped = hit(self.faults, "drop", SPLIT, seq, F.col("attempt"))
        failed = ~dropped & hit(self.faults, "fail", SPLIT, seq, F.col("attempt"))
        # One pass: the job that writes the words gathers the acks and fails of the
        # batch (`explode_acked`); a dropped sentence is neither acked nor failed.
        words, events = self.split.explode_acked(
            rows.where(~parsed | ~dropped),
            _tokens(),
            "word",
            position="position",
            fails=[
                (~parsed, "malformed message: not JSON with a seq and a text"),
                (failed, "injected failure at split"),
            ],
        )
        # Outputs, then (a kill may come here) the events: a re-run skips the words
        # (their transaction id is the batch id) and computes the same events again.
        self.split.write_batch(
            batch_id,
            outputs={self.words_path: self._word_columns(words)},
            roots=registration,
            events=[],
        )
        if SPLIT in self.killer.pending and not rows.isEmpty():  # a job only when a kill is due
            self.killer.maybe_kill(SPLIT)
        self.split.write_batch(batch_id, events=[events])

    def _kafka_split_batch(self, frame: DataFrame, batch_id: int) -> None:
        """Split the batch's records as on SQS; the words' write registers them as roots
        too (one pass: `register_one_pass`)."""
        assert self.kafka is not None
        sentences, registration = self.kafka.register_one_pass(frame, batch_id)
        self._split_batch(sentences, batch_id, registration)

    def _words(self, sentences: DataFrame, *, fault_keys: bool | None = None) -> DataFrame:
        """One tracked tuple per word of each sentence (rows with a parsed `doc`), with
        `count`'s fault keys if it has faults (or if `fault_keys` says so)."""
        words = self.split.explode(sentences, _tokens(), "word", position="position")
        return self._word_columns(words, fault_keys=fault_keys)

    def _word_columns(self, words: DataFrame, *, fault_keys: bool | None = None) -> DataFrame:
        """The columns of `words` the `words` table keeps."""
        from pyspark.sql import functions as F

        keys = [F.col("doc.seq").alias("seq"), F.col("attempt")]
        if fault_keys is None:
            fault_keys = COUNT in self.faults.stages() or bool(self.stuck)
        return words.select(
            "origin_root_id", *(keys if fault_keys else []), "position", "word", "_ackfold"
        )

    def _count_batch(self, frame: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        be_slow(self.faults, COUNT)
        # The outage is a window over each sentence: a column, not a filter's condition.
        words = frame.withColumn("_outage", self._outage()).cache()
        key = (F.col("seq"), F.col("attempt"), F.col("position"))
        dropped = hit(self.faults, "drop", COUNT, *key)
        stuck = ~dropped & F.col("_outage")
        failed = ~dropped & ~stuck & hit(self.faults, "fail", COUNT, *key)
        good = words.where(~dropped & ~failed & ~stuck)
        # Keyed on the origin root: a replayed sentence inserts only what is missing.
        dml.merge(
            self.counted_path,
            # One row per key: an insert-only MERGE inserts every unmatched source
            # row, and a message delivered twice brings its words twice.
            good.select(*_COUNTED_COLUMNS).dropDuplicates(["origin_root_id", "position"]),
            on="t.origin_root_id = s.origin_root_id AND t.position = s.position",
            clauses=[_INSERT_WORDS],
        )
        if COUNT in self.killer.pending and not words.isEmpty():  # a job only when due
            self.killer.maybe_kill(COUNT)
        self.count.write_batch(
            batch_id,
            events=[
                self.count.ack(good),
                self.count.fail(words.where(failed), "injected failure at count"),
                self.count.fail(
                    words.where(stuck),
                    "injected outage at count: fails on every automatic attempt",
                ),
            ],
        )
        words.unpersist()

    def _outage(self) -> Column:
        """True for the words of a stuck sentence that its outage hits, on every automatic
        attempt: the second half of the sentence (its last word at least). The first half
        is counted: a stuck message is a dead letter that left part of its words in the
        sink, for `ackfold retract` to take back."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if not self.stuck:
            return F.lit(False)
        sentence = Window.partitionBy("origin_root_id", "attempt")
        last = F.max("position").over(sentence)
        return (
            F.col("seq").isin(self.stuck)
            & (F.col("attempt") <= self.max_attempts)
            & (F.col("position") * 2 >= last)
        )

    # -- running ------------------------------------------------------------------------

    def _queries(self) -> list[tuple[str, Callable[[], DataFrame], Any]]:
        split: tuple[str, Callable[[], DataFrame], Any]
        if self.kafka is not None:
            split = (SPLIT, self.kafka.stream, self._kafka_split_batch)
        else:
            assert self.ingester is not None
            split = (SPLIT, self.ingester.stream, self._split_batch)
        return [split, (COUNT, self._words_stream, self._count_batch)]

    @property
    def taken(self) -> int:
        """Messages registered as roots so far by this process."""
        if self.kafka is not None:
            return self.kafka.registered
        assert self.ingester is not None
        return self.ingester.stats.registered

    def _words_stream(self) -> DataFrame:
        return self.spark.readStream.format("delta").load(self.words_path)

    def _start(
        self, stage: str, source: Callable[[], DataFrame], batch: Any, trigger: dict[str, Any]
    ) -> StreamingQuery:
        return start_stage(
            source(),
            name=query_name(self.app, stage),
            batch=batch,
            checkpoint=f"{self.checkpoints}/{stage}",
            trigger=trigger,
        )

    def step(self) -> int:
        """Ingest what the queue holds (SQS), then run split and count to the end of their
        input. A query killed mid-batch is restarted from its checkpoint. Returns messages
        taken."""
        before = self.taken
        if self.ingester is not None:
            self.ingester.run(until_idle=0.5)
        for stage, source, batch in self._queries():
            self.restarts += run_to_end(
                self.spark,
                self.app,
                stage,
                lambda: self._start(stage, source, batch, {"availableNow": True}),  # noqa: B023
                self.killer,
            )
        return self.taken - before

    def start(self, stop: threading.Event, trigger: str = "2 seconds") -> None:
        """Run continuously until `stop` is set: the ingester (SQS) in this thread, the
        two queries on their own triggers. Used after the demo's report, to keep the app up.
        While it runs, its queries' progress is its heartbeat (`app_progress`)."""
        beat = install_heartbeat(self.spark, self.settings, self.app)
        self.queries = [
            self._start(s, src, b, {"processingTime": trigger}) for s, src, b in self._queries()
        ]
        try:
            if self.ingester is not None:
                self.ingester.run(stop=stop)
            else:
                while not stop.wait(1.0) and self.failure() is None:
                    pass
        finally:
            for query in self.queries:
                query.stop()
            remove_heartbeat(self.spark, beat)

    def failure(self) -> str | None:
        """Why a continuously running query died, if one did."""
        for query in self.queries:
            error = query.exception()
            if error is not None:
                return f"query {query.name} stopped: {error}"
        return None

    # -- reading back -------------------------------------------------------------------

    def word_counts(self) -> Counter[str]:
        from pyspark.sql import functions as F

        counted = self.spark.read.format("delta").load(self.counted_path)
        rows = counted.groupBy("word").agg(F.count("*").alias("n")).collect()
        return Counter({r["word"]: r["n"] for r in rows})

    def _create_tables(self) -> None:
        from pyspark.sql import functions as F

        create_tables(self.spark, self.ledger)
        # Empty tables with the right schemas, so that `count` can start before any word.
        roots = self.spark.read.format("delta").load(self.ledger.path(ROOTS)).limit(0)
        sentences = self.spout.registered(roots, to=[SPLIT])
        parsed = sentences.withColumn("doc", F.from_json("payload", _BODY))
        self._words(parsed, fault_keys=True).write.format("delta").mode("ignore").save(
            self.words_path
        )
        counted = local_frame(self.spark, [], _COUNTED)
        counted.write.format("delta").mode("ignore").save(self.counted_path)
        self._declare_sink()

    def _declare_sink(self) -> None:
        """Declare the sink, a MERGE target, as an output of the app (`words` is declared
        by `write_batch`): what its dead letters leave there can be found and retracted.
        Once: a declaration the ledger has (a user's, marking it clean) stays."""
        from ackfold.effects.outputs import declare_output, read_declared

        if all(d.output != self.counted_path for d in read_declared(self.ledger.root)):
            declare_output(self.ledger, self.app, self.counted_path, declared_by="ackfold demo")
