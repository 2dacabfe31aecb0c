"""The word-count delivery test of `test_wordcount_demo.py`, on Kafka: the same seeded
drops, fails, poison and stuck messages, and both queries killed mid-batch and restarted
from their checkpoints. Nothing is lost, the dead letters are exactly the poison and stuck
messages, in the dead-letter topic with their reason, and the word counts are exact. The
stuck messages' half-counted words are found, fail the sink marked clean (the quality
checks on Spark), are retracted and audited, and the counts then hold for the completed
messages alone."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.demo.run import Demo
from ackfold.effects import (
    RetractRequest,
    dead_letter_effects,
    declare_output,
    retract_history,
    run_retract,
)
from ackfold.ledger.schema.tables import DEAD_LETTERS, ROOTS
from ackfold.quality.effects import CLEAN_OUTPUT
from ackfold.runs import run_quality
from ackfold.sources.base import ATTEMPT, DEAD_REASON, ORIGIN_ROOT_ID
from ackfold.sources.kafka import KafkaTopic
from ackfold_dev.kafka_broker import KafkaBroker
from tests.conftest import JARS_DIR
from tests.e2e.test_wordcount_demo import FAULTS, MESSAGES, stuck_half, stuck_origins
from tests.kafka.conftest import consume_all


def test_on_kafka_nothing_is_lost_the_counts_are_exact_and_dead_letters_are_the_poison(
    spark: SparkSession, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = f"sentences-{uuid.uuid4().hex[:8]}"
    settings = load_settings(
        var_dir=tmp_path / "var", jars_dir=JARS_DIR,
        kafka={"bootstrap_servers": kafka_broker.bootstrap_servers},
        apps={"wordcount": {"source": "kafka", "source_queue": topic}},
    )  # fmt: skip
    printed: list[str] = []
    demo = Demo(spark, settings, messages=MESSAGES, faults=FAULTS, say=printed.append)
    report = demo.run()

    assert printed[0].startswith(f"demo: word count on Kafka topic {topic}")
    assert report.sent == report.registered == MESSAGES
    assert report.lost == 0, report.lost_seqs
    assert report.dead_lettered_seqs == demo.feed.dead_letters, "the poison and the stuck"
    assert report.expected_dead == 5
    assert report.out_of_attempts == 0, report.out_of_attempts_reasons
    assert report.words_exact, report.word_mismatches
    assert report.completed_messages == MESSAGES - 5, "every count compared"
    assert report.ok
    assert report.queries_restarted == 2, "both queries were killed mid-batch and restarted"
    # The killed split batch ran again: its records are registered once all the same.
    assert report.duplicates == 0
    # The faults happened, and replays repaired them.
    assert report.completed_after_replay > 0.05 * MESSAGES
    assert report.completed_first_try + report.completed_after_replay + 5 == MESSAGES

    # Roots point at their records; no payload is kept.
    roots = spark.read.format("delta").load(f"{demo.app.ledger.root}/{ROOTS}")
    assert roots.where("source <> 'kafka' OR payload IS NOT NULL").isEmpty()
    assert roots.where(f"source_position NOT LIKE '{topic}:%:%'").isEmpty()

    # Every replay is a re-read record with its attempt's headers, in the source topic.
    records = consume_all(settings, topic)
    replays = [dict(r.headers() or []) for r in records if r.headers()]
    assert len(records) == MESSAGES + len(replays)
    assert replays
    assert all(ORIGIN_ROOT_ID in h and int(h[ATTEMPT]) >= 2 for h in replays)

    # The dead letters, with their reasons, in the ledger and in the dead-letter topic.
    dead = spark.read.format("delta").load(f"{demo.app.ledger.root}/{DEAD_LETTERS}").collect()
    reasons = sorted(r["reason"].split(":")[1].strip() for r in dead)
    assert reasons == ["injected outage at count"] * 2 + ["malformed message"] * 3
    assert isinstance(demo.app.queue, KafkaTopic)
    letters = consume_all(settings, demo.app.queue.dead_letter_queue)
    assert len(letters) == 5
    malformed = [r for r in letters if b"malformed message" in dict(r.headers())[DEAD_REASON]]
    assert len(malformed) == 3
    # As they were sent (cut off mid-JSON), after the policy's 5 attempts.
    assert all(r.value().endswith(b'"text": ') for r in malformed)
    assert {dict(r.headers())[ATTEMPT] for r in malformed} == {b"6"}

    # What the stuck dead letters left (half their words, at count): found, failing the
    # sink once it is marked clean (the quality checks on the Spark engine), retracted.
    counted = demo.app.counted_path
    half = stuck_half(demo)
    assert report.dead_letter_rows["counted"] == report.dead_letter_words == half > 0
    origins = stuck_origins(demo, spark)
    found = dead_letter_effects(settings, app="wordcount")
    assert {e.root.origin_root_id for e in found if e.has_effects} == origins
    declare_output(settings.table_root, "wordcount", counted, clean=True)
    on_spark = settings.model_copy(
        update={"engine": settings.engine.model_copy(update={"kind": "spark"})}
    )
    later = datetime.now(UTC) + timedelta(hours=1)
    checked = run_quality(on_spark, spark=spark, app="wordcount", now=later)
    clean = [(r.success, r.observed) for r in checked.results if r.check == CLEAN_OUTPUT]
    assert clean == [(False, str(half))]

    summary = run_retract(
        settings, RetractRequest(app="wordcount", dry_run=False, requested_by="e2e")
    )
    assert summary.deleted == {counted: half}, "words, which count reads, keeps its rows"
    history = retract_history(settings, app="wordcount")
    assert {(r.origin_root_id, r.event) for r in history} == {
        (o, e) for o in origins for e in ("planned", "deleted")
    }
    assert {r.requested_by for r in history} == {"e2e"}
    rows = spark.read.format("delta").load(counted).groupBy("word").count().collect()
    assert {r["word"]: r["count"] for r in rows} == demo.feed.true_counts()
    again = demo.report()
    assert again.dead_letter_rows == {"counted": 0}
    assert again.words_exact
    assert again.words_counted == sum(demo.feed.true_counts().values())
