"""A split's words, acks and fails in one pass (``StageTracker.explode_acked``, issue 56):
the same ledger rows as the two passes (``explode``, then ``ack(exploded=)`` and ``fail``)
and as the plain-Python ``Tracker``, on both id schemes and in both ack modes; one Spark
job for the whole batch; and a re-run whose words Delta skips writes the same events.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackfold.ledger.schema import schemes, status
from ackfold.ledger.schema.tables import Ledger
from ackfold.track.stage import StageTracker
from ackfold.track.tracker import Tracker

from .test_tracking import T0, keyed, read, statuses, version

APP = "onepass"
LINES = [("m-1", "a b c"), ("m-2", ""), ("m-3", None), ("m-4", "d"), ("m-5", "e f"), ("m-6", "#")]


def sentences(spark: SparkSession) -> DataFrame:
    # m-1 twice: a copy of an input in one batch counts once.
    return spark.createDataFrame([*LINES, LINES[0]], "id string, text string")


def inputs_of(spark: SparkSession, scheme: int, to: list[str] | None) -> DataFrame:
    """The split's inputs: a spout's tuples in `scheme`, to `to` (None: any one stage)."""
    spout = StageTracker(APP, "spout", id_scheme=scheme)
    return spout.spout(sentences(spark), message_id="id", source="q", to=to).tuples


def fails() -> list[tuple[Any, str]]:
    return [
        (F.col("text").isNull(), "no text"),
        (F.col("text") == "#", "a comment"),
    ]


def items() -> Any:
    return F.split(F.col("text"), " ")


def events_in(path: Path) -> list[Any]:
    from deltalake import DeltaTable

    rows: list[Any] = DeltaTable(str(path / "ack_events")).to_pyarrow_table().to_pylist()
    return rows


@pytest.mark.parametrize("scheme", [schemes.TEXT, schemes.NUMERIC])
@pytest.mark.parametrize("acks", ["compact", "per_tuple"])
def test_one_pass_writes_the_events_of_two_passes(
    spark: SparkSession, tmp_path: Path, scheme: int, acks: str
) -> None:
    """Short and named inputs, children to any one stage, to two and to none; empty and
    null arrays, fails by condition, a copy of an input: the one pass commits exactly the
    rows the two passes commit."""
    for k, (spout_to, to) in enumerate(
        [(None, None), (["split"], ["count", "audit"]), (["split"], [])]
    ):
        inputs = inputs_of(spark, scheme, spout_to)
        one = tmp_path / f"one{k}"
        split = StageTracker(APP, "split", ledger=str(one), acks=acks)
        words, gathered = split.explode_acked(inputs, items(), "word", fails=fails(), to=to)
        split.write_batch(0, outputs={str(one / "words"): words}, events=[gathered])
        assert gathered.result() is not None  # the write's job observed them: no second pass

        two = tmp_path / f"two{k}"
        split2 = StageTracker(APP, "split", ledger=str(two), acks=acks)
        bad, comment = F.col("text").isNull(), F.col("text") == "#"
        good = inputs.where(~bad & ~comment)
        split2.write_batch(
            0,
            outputs={str(two / "words"): split2.explode(good, items(), "word", to=to)},
            events=[
                split2.ack(good, exploded=items(), to=to),
                split2.fail(inputs.where(bad), "no text"),
                split2.fail(inputs.where(~bad & comment), "a comment"),
            ],
        )
        ones, twos = events_in(one), events_in(two)
        assert set(keyed(ones)) == set(keyed(twos)), (k, acks, scheme)
        assert len(ones) == len(twos)
        assert sorted(read(spark, str(one / "words"))) == sorted(read(spark, str(two / "words")))


@pytest.mark.parametrize("scheme", [schemes.TEXT, schemes.NUMERIC])
def test_one_pass_folds_like_the_reference_tracker(
    spark: SparkSession, tmp_path: Path, scheme: int
) -> None:
    """The split's events and the words' acks, folded by the reference fold: every edge
    enters the XOR twice (the sentences complete once their words are acked), the fails
    fail, as the plain-Python Tracker's events of the same topology fold."""
    spout = StageTracker(APP, "spout", id_scheme=scheme)
    out = spout.spout(sentences(spark), message_id="id", source="q")
    split = StageTracker(APP, "split", ledger=str(tmp_path))
    words, gathered = split.explode_acked(out.tuples, items(), "word", fails=fails())
    words_path = str(tmp_path / "words")
    split.write_batch(0, outputs={words_path: words}, events=[out.events, gathered])
    count = StageTracker(APP, "count", ledger=str(tmp_path))
    count.write_batch(0, events=[count.ack(spark.read.format("delta").load(words_path))])
    spark_events = events_in(tmp_path)

    tracker = Tracker(APP, clock=lambda: T0, acks="compact", id_scheme=scheme)
    for message_id, text in LINES:
        line = tracker.spout(message_id, source="q")
        if text is None or text == "#":
            reason = "no text" if text is None else "a comment"
            tracker.fail(line, stage="split", reason=reason)
            continue
        children = [tracker.emit([line], stage="split") for _ in text.split(" ")]
        tracker.ack(line, stage="split")
        for child in children:
            tracker.ack(child, stage="count")
    python_events = tracker.drain()
    assert set(keyed(spark_events)) == set(keyed(python_events))
    folded = statuses(spark_events)
    assert folded == statuses(python_events)
    assert sorted(folded.values()).count(status.FAILED) == 2
    assert sorted(folded.values()).count(status.COMPLETED) == 4


def jobs(spark: SparkSession) -> Callable[[], int]:
    """How many Spark jobs this session has run so far."""
    tracker = spark.sparkContext.statusTracker()
    return lambda: len(tracker.getJobIdsForGroup(None))


def test_one_pass_runs_the_words_job_only_and_a_rerun_writes_the_same_events(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The split's batch (words, acks, fails) costs the job that writes the words and
    nothing more: no second job reads the batch again. A re-run of the batch, whose
    words Delta skips (no job, nothing observed), commits the same events (computed from
    the inputs again), which the fold reads once; the words are written once."""
    ledger = Ledger(str(tmp_path))
    words_path = str(tmp_path / "words")
    inputs = inputs_of(spark, schemes.NUMERIC, None)

    def run(split: StageTracker) -> None:
        words, gathered = split.explode_acked(inputs, items(), "word", fails=fails())
        split.write_batch(0, outputs={words_path: words}, events=[gathered])

    run(StageTracker(APP, "split", ledger=ledger, writer_id="w"))  # the tables, declared
    first = events_in(tmp_path)
    split = StageTracker(APP, "split", ledger=ledger, writer_id="w")
    words, gathered = split.explode_acked(inputs, items(), "word", fails=fails())
    counted = jobs(spark)
    before = counted()
    split.write_batch(1, outputs={words_path: words}, events=[gathered])
    with_one_pass = counted() - before
    split.write_batch(2, outputs={words_path: split.explode(inputs, items(), "word")})
    words_only = counted() - before - with_one_pass
    assert with_one_pass == words_only  # the events added no Spark job
    assert version(words_path) == 2

    run(StageTracker(APP, "split", ledger=ledger, writer_id="w"))  # batch 0 again: skipped
    assert version(words_path) == 2
    again = events_in(tmp_path)
    assert sorted(keyed(again)) == sorted(keyed(first) * 3)  # batches 0, 1, 0 again (2: none)
    assert set(statuses(again).values()) == set(statuses(first).values())


def test_a_failing_condition_needs_a_reason(spark: SparkSession) -> None:
    split = StageTracker(APP, "split")
    with pytest.raises(ValueError, match="non-empty reason"):
        split.explode_acked(inputs_of(spark, 1, None), items(), "w", fails=[(F.lit(True), " ")])


def test_children_read_before_their_write_fall_back_to_the_second_pass(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An action on the children before `write_batch` completes the observation with what
    that action read: `write_batch` sees it, warns, and computes the events again from the
    inputs, the same rows as a clean one pass."""
    inputs = inputs_of(spark, schemes.NUMERIC, None)
    clean = StageTracker(APP, "split", ledger=str(tmp_path / "clean"))
    words, gathered = clean.explode_acked(inputs, items(), "word", fails=fails())
    clean.write_batch(0, outputs={str(tmp_path / "clean" / "words"): words}, events=[gathered])

    early = StageTracker(APP, "split", ledger=str(tmp_path / "early"))
    words, gathered = early.explode_acked(inputs, items(), "word", fails=fails())
    assert words.limit(1).count() == 1  # reads one word: the observation saw part of a batch
    early.write_batch(0, outputs={str(tmp_path / "early" / "words"): words}, events=[gathered])
    # Seen however late Spark's listener bus delivers the read's end (it is waited for).
    assert "read before write_batch" in caplog.text
    assert "listener bus" not in caplog.text
    assert keyed(events_in(tmp_path / "early")) == keyed(events_in(tmp_path / "clean"))


def test_the_first_write_to_a_new_output_runs_no_read_that_fails(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`write_batch` reads an output's schema before its first append. A Spark read of a
    table that is not there yet fails its analysis, which Spark posts to its query
    listeners; with the one pass's observation pending, Spark's ObservationManager logs
    that as an ERROR with a long trace, at every new output table. Whether the table
    exists is asked of Delta's log instead: no Spark read fails, and the table is made."""
    from pyspark.sql.readwriter import DataFrameReader

    failed: list[str] = []
    load = DataFrameReader.load

    def load_noting_failures(self: DataFrameReader, *args: Any, **kwargs: Any) -> DataFrame:
        try:
            return load(self, *args, **kwargs)
        except Exception as exc:
            failed.append(f"{args}: {exc}")
            raise

    monkeypatch.setattr(DataFrameReader, "load", load_noting_failures)
    words_path = str(tmp_path / "words")
    split = StageTracker(APP, "split", ledger=str(tmp_path))
    inputs = inputs_of(spark, schemes.NUMERIC, None)
    words, gathered = split.explode_acked(inputs, items(), "word", fails=fails())
    split.write_batch(0, outputs={words_path: words}, events=[gathered])
    assert failed == []
    assert version(words_path) == 0  # made by this first append
    again = StageTracker(APP, "split", ledger=str(tmp_path))  # reads the schema again
    again.write_batch(1, outputs={words_path: again.explode(inputs, items(), "word")})
    assert version(words_path) == 1
    assert failed == []
