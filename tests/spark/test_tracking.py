"""The Spark tracking API writes exactly the events the plain-Python Tracker writes.

Each test drives one topology twice: through ``StageTracker`` on DataFrames (a real
streaming query for the word count) and through ``Tracker`` in plain Python, in the same
ack mode (compact, or per tuple), then compares the ledger rows (all but ``event_time``)
and the statuses that ``fold`` + ``classify`` give.
"""

from __future__ import annotations

import doctest
import json
import re
import subprocess
import sys
import textwrap
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackfold.ledger.schema import ids, schemes, status
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.reconcile.fold import classify, fold
from ackfold.track import children as child_verbs
from ackfold.track import columns, layout, sql_ids, stage
from ackfold.track.layout import as_tuple
from ackfold.track.stage import StageTracker
from ackfold.track.tracker import Tracker
from ackfold.track.tuples import Tuple

APP = "wordcount"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
KEY = ("event_id", "app", "root_id", "kind", "ack_val", "stage", "reason")
ROOT_KEY = (
    "root_id",
    "app",
    "attempt",
    "origin_root_id",
    "source",
    "source_queue",
    "source_message_id",
    "source_position",
    "payload",
)


def keyed(rows: Iterable[Any], key: tuple[str, ...] = KEY) -> list[tuple[Any, ...]]:
    """Rows (dicts or Spark Rows) as sorted tuples of ``key``: event_time left out."""
    return sorted(tuple(row[k] for k in key) for row in rows)


def statuses(events: Iterable[Any]) -> dict[int, str]:
    """fold + classify, with every event_time pinned to T0 (the Spark clock is real)."""
    pinned = [{**{k: e[k] for k in KEY}, "event_time": T0} for e in events]
    return {
        root: classify(f, now=T0, timeout=timedelta(hours=1)) for root, f in fold(pinned).items()
    }


def read(spark: SparkSession, path: str) -> list[Any]:
    return spark.read.format("delta").load(path).collect()


def txns(path: str) -> list[dict[str, Any]]:
    """The ``txn`` actions (txnAppId, txnVersion) of a table's commits, in commit order."""
    found = []
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                found.append(action["txn"])
    return found


def version(path: str) -> int:
    """The table's latest commit, from its log directory (no Spark job)."""
    return max(int(p.stem) for p in (Path(path) / "_delta_log").glob("*.json"))


# -- the word count, as two streaming queries joined by a Delta table ---------------------

LINES = {
    "m-1": "the cat",
    "m-2": "the dog lost",  # "lost" is never acked by count: m-2 stays pending
    "m-3": "#corrupt",  # split fails it with a reason
    "m-4": "cat and dog",
    "m-5": "dog",
}


def python_word_count() -> Tracker:
    """The word count through Tracker: spout -> split -> count (across roots) -> sink, with
    compact acks (each stage's acks of a root fall in one micro-batch, as in the Spark run
    below)."""
    tracker = Tracker(APP, clock=lambda: T0, acks="compact")
    words: dict[str, list[Tuple]] = defaultdict(list)
    for message_id, text in LINES.items():
        line = tracker.spout(message_id, source="test", source_position=f"p-{message_id}")
        if text.startswith("#"):
            tracker.fail(line, stage="split", reason="unparseable line")
            continue
        for position, word in enumerate(text.split(" ")):
            words[word].append(tracker.emit([line], stage="split", position=position))
        tracker.ack(line, stage="split")
    for word, tuples in words.items():
        if word == "lost":
            continue
        anchors = sorted(tuples, key=lambda t: t.id)  # as StageTracker.aggregate sorts them
        count = tracker.emit(anchors, stage="count", position=0)
        for anchor in anchors:
            tracker.ack(anchor, stage="count")
        tracker.ack(count, stage="sink")
    return tracker


def test_streaming_word_count_writes_the_tracker_events(
    spark: SparkSession, tmp_path: Path
) -> None:
    ledger = Ledger(str(tmp_path / "ledger"))
    words_path, counts_path = str(tmp_path / "words"), str(tmp_path / "counts")
    source = tmp_path / "source"
    source.mkdir()
    # Two files and maxFilesPerTrigger=1: the split query runs two micro-batches.
    for n, ids_in_file in enumerate([("m-1", "m-2", "m-3"), ("m-4", "m-5")]):
        lines = [json.dumps({"id": i, "text": LINES[i]}) for i in ids_in_file]
        (source / f"part-{n}.json").write_text("\n".join(lines) + "\n")

    spout = StageTracker(APP, "spout", ledger=ledger)
    split = StageTracker(APP, "split", ledger=ledger)

    def split_batch(batch: DataFrame, batch_id: int) -> None:
        lines = spout.spout(
            batch,
            message_id="id",
            source="test",
            source_position=F.concat(F.lit("p-"), "id"),
        )
        bad = F.col("text").startswith("#")
        good = lines.tuples.where(~bad)
        words = split.explode(good, F.split("text", " "), "word").select("word", "_ackfold")
        split.write_batch(
            batch_id,
            outputs={words_path: words},
            roots=lines.roots,
            events=[
                lines.events,
                split.ack(good, words),
                split.fail(lines.tuples.where(bad), "unparseable line"),
            ],
        )

    count = StageTracker(APP, "count", ledger=ledger)
    sink = StageTracker(APP, "sink", ledger=ledger)

    def count_batch(batch: DataFrame, batch_id: int) -> None:
        kept = batch.where(F.col("word") != "lost")  # a tuple left un-acked, on purpose
        counts = count.aggregate(kept, "word", F.count("*").alias("n"))
        count.write_batch(
            batch_id,
            outputs={counts_path: counts},
            events=[count.ack(kept, counts), sink.ack(counts)],
        )

    (
        spark.readStream.schema("id string, text string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.foreachBatch(split_batch)
        .option("checkpointLocation", str(tmp_path / "checkpoints" / "split"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )
    (
        spark.readStream.format("delta")
        .load(words_path)
        .writeStream.foreachBatch(count_batch)
        .option("checkpointLocation", str(tmp_path / "checkpoints" / "count"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )

    # One count batch, as the Python mirror counts all words in one group-by (read off the
    # table: under Spark Connect this function runs in a copy, on the server).
    assert [txn["version"] for txn in txns(counts_path)] == [0]
    # Split ran two batches; each commit names the streaming query and the batch id.
    written = txns(words_path)
    assert [txn["version"] for txn in written] == [0, 1]
    (writer,) = {txn["appId"] for txn in written}
    assert re.fullmatch(rf"ackfold/{APP}/split/[0-9a-f-]{{36}}", writer)
    tracker = python_word_count()
    expected_events, expected_roots = tracker.drain(), tracker.drain_roots()
    events = read(spark, ledger.path(ACK_EVENTS))
    assert keyed(events) == keyed(expected_events)
    assert keyed(read(spark, ledger.path(ROOTS)), ROOT_KEY) == keyed(expected_roots, ROOT_KEY)
    # Compact: per root, an init, one ack per stage that acked it (m-3 failed at split).
    assert len(events) == 5 + 4 + 4 + 4 + 1

    root = {m: ids.root_id(APP, f"test::{m}") for m in LINES}
    assert (
        statuses(events)
        == statuses(expected_events)
        == {
            root["m-1"]: status.COMPLETED,
            root["m-2"]: status.PENDING,
            root["m-3"]: status.FAILED,
            root["m-4"]: status.COMPLETED,
            root["m-5"]: status.COMPLETED,
        }
    )
    # The count tuples crossed a Delta table and still name every root they came from.
    counts = {row.word: row for row in read(spark, counts_path)}
    assert {w: row.n for w, row in counts.items()} == {"the": 2, "cat": 2, "dog": 3, "and": 1}
    assert set(as_tuple(counts["dog"]._ackfold).roots) == {root["m-2"], root["m-4"], root["m-5"]}


# -- ids -------------------------------------------------------------------------------------


def test_spark_ids_equal_the_python_ids(spark: SparkSession) -> None:
    r1 = ids.root_id("orders", "sqs:orders-in:m-1")
    lit = F.lit
    null = F.lit(None).cast("bigint")
    anchors = F.array(lit(-5), lit(11), lit(12)).cast("array<bigint>")
    cases = {
        "root": (sql_ids.root_id("orders", lit("sqs:orders-in:m-1"), lit(1), null), r1),
        "root_attempt_1_with_origin": (
            sql_ids.root_id("orders", lit("sqs:orders-in:m-1"), lit(1), lit(r1)),
            r1,
        ),
        "root_attempt_3": (
            sql_ids.root_id("orders", lit("ignored"), lit(3), lit(r1)),
            ids.root_id("orders", "sqs:orders-in:m-1", attempt=3, origin_root_id=r1),
        ),
        "spout": (sql_ids.spout_tuple_id(lit(r1)), ids.spout_tuple_id(r1)),
        "tuple": (
            sql_ids.tuple_id("parse", lit(2), anchors),
            ids.tuple_id("parse", 2, [-5, 11, 12]),
        ),
        "edge": (
            sql_ids.edge_id(lit(-77), lit(r1), lit(1), lit("")),
            ids.edge_id(-77, r1, 1, ""),
        ),
        "edge_named": (
            sql_ids.edge_id(lit(3), lit(5), lit(0), lit("count")),
            ids.edge_id(3, 5, 0, "count"),
        ),
        "event": (
            sql_ids.event_id("orders", lit(r1), "ack", "parse", lit(-9)),
            ids.event_id("orders", r1, "ack", "parse", -9),
        ),
        "hash_unicode": (sql_ids.hash64("wörd", 0, -1), ids.hash64("wörd", 0, -1)),
        "spout_numeric": (sql_ids.spout_tuple_id(lit(r1), 2), schemes.spout_tuple_id(r1, 2)),
        "spout_by_column": (
            sql_ids.spout_tuple_id(lit(r1), lit(2)),
            schemes.spout_tuple_id(r1, schemes.NUMERIC),
        ),
        "spout_null_scheme": (  # a null scheme is the text one
            sql_ids.spout_tuple_id(lit(r1), lit(None).cast("int")),
            schemes.spout_tuple_id(r1, schemes.TEXT),
        ),
        "tuple_numeric": (
            sql_ids.tuple_id("parse", lit(2), anchors, lit(2)),
            schemes.tuple_id("parse", 2, [-5, 11, 12], schemes.NUMERIC),
        ),
        "edge_numeric": (
            sql_ids.edge_id(lit(3), lit(5), lit(1), lit("count"), lit(2)),
            schemes.edge_id(3, 5, 1, "count", schemes.NUMERIC),
        ),
        "one_edge_numeric": (sql_ids.one_edge(lit(-77), lit(r1), 2), -77),
        "one_edge_text": (sql_ids.one_edge(lit(-77), lit(r1), 1), ids.edge_id(-77, r1, 0, "")),
        "numbers_unicode": (
            sql_ids.hash_numbers(4, lit("wörd"), lit(-1).cast("bigint")),
            schemes.hash_numbers(4, "wörd", -1),
        ),
    }
    row = spark.range(1).select(*[col.alias(name) for name, (col, _) in cases.items()]).first()
    assert row is not None
    assert row.asDict() == {name: want for name, (_, want) in cases.items()}


def test_a_replayed_attempt_registers_the_tracker_root(spark: SparkSession) -> None:
    origin = ids.root_id(APP, "sqs:in:m-1")
    batch = spark.createDataFrame([("m-1", 2, origin)], "id string, attempt int, origin bigint")
    spouted = StageTracker(APP, "spout").spout(
        batch,
        message_id="id",
        source="sqs",
        source_queue="in",
        attempt="attempt",
        origin_root_id="origin",
    )
    tracker = Tracker(APP, clock=lambda: T0)
    retry = tracker.spout("m-1", source="sqs", source_queue="in", attempt=2, origin_root_id=origin)
    assert keyed(spouted.events.collect()) == keyed(tracker.drain())
    assert keyed(spouted.roots.collect(), ROOT_KEY) == keyed(tracker.drain_roots(), ROOT_KEY)
    assert as_tuple(spouted.tuples.first()["_ackfold"]) == retry


def test_acks_from_the_exploded_array_equal_the_acks_from_the_children(
    spark: SparkSession,
) -> None:
    """``ack(inputs, exploded=items, to=...)`` writes what ``ack(inputs, explode(...))``
    writes, in both ack modes: roots of both id schemes, short and general inputs (a
    spout's tuple to named stages, a child of two roots), empty and null arrays, a copy of
    an input, and children to any one stage, to two named stages and to none."""
    rows = [("m-1", "a b c"), ("m-2", ""), ("m-3", None), ("m-4", "d"), ("m-5", "e f")]
    batch = spark.createDataFrame(rows, "id string, text string")
    old = StageTracker(APP, "spout", id_scheme=schemes.TEXT)
    new = StageTracker(APP, "spout")
    short = new.spout(batch, message_id="id", source="q").tuples
    named = old.spout(batch, message_id="id", source="q", to=["split"]).tuples
    pair = short.where("id = 'm-1'").alias("l").crossJoin(named.where("id = 'm-5'").alias("r"))
    joined = StageTracker(APP, "join").emit(
        pair.select(F.col("l._ackfold").alias("a"), F.col("r._ackfold").alias("b"), "r.text"),
        anchors=["a", "b"],
    )
    items = F.split(F.col("text"), " ")
    cases = [
        (inputs, to)
        for inputs in (short.union(short.where("id = 'm-1'")), named, joined)
        for to in (None, ["count", "audit"], [])
    ]
    for acks in ("compact", "per_tuple"):
        # Each case writes as its own app, so that the cases' rows stay apart in one collect.
        splits = [StageTracker(f"app{k}", "split", acks=acks) for k in range(len(cases))]
        by_rows = collect_events(*[
            split.ack(inputs, split.explode(inputs, items, "word", to=to))
            for split, (inputs, to) in zip(splits, cases, strict=True)
        ])  # fmt: skip
        by_array = collect_events(*[
            split.ack(inputs, exploded=items, to=to)
            for split, (inputs, to) in zip(splits, cases, strict=True)
        ])  # fmt: skip
        # Per tuple, a copy of an input writes its row twice: one event to the fold.
        assert set(keyed(by_array)) == set(keyed(by_rows)), acks
        assert {r["app"] for r in by_array} == {s.app for s in splits}
    with pytest.raises(ValueError, match="not both"):
        splits[0].ack(short, short, exploded=items)


# -- Storm's hard cases: several roots, a parent anchored twice, a diamond --------------------


def spout_rows(spark: SparkSession, n: int) -> DataFrame:
    return spark.createDataFrame(
        [(f"m-{i}", f"k{i % 2}") for i in range(1, n + 1)], "id string, key string"
    )


def collect_events(*frames: DataFrame) -> list[Any]:
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union.collect()


@pytest.mark.parametrize("acks", ["compact", "per_tuple"])
def test_aggregate_and_join_across_roots_match_tracker(spark: SparkSession, acks: str) -> None:
    spouted = StageTracker(APP, "spout").spout(spout_rows(spark, 5), message_id="id", source="q")
    count, join, sink = (StageTracker(APP, s, acks=acks) for s in ("count", "join", "sink"))
    to_count = spouted.tuples.where(F.col("id").isin("m-1", "m-2", "m-3"))
    counts = count.aggregate(to_count, "key", F.count("*").alias("n"))
    left = spouted.tuples.where(F.col("id") == "m-4").select(F.col("_ackfold").alias("l"))
    right = spouted.tuples.where(F.col("id") == "m-5").select(F.col("_ackfold").alias("r"))
    joined = join.emit(left.crossJoin(right), anchors=["l", "r"])
    to_join = spouted.tuples.where(F.col("id").isin("m-4", "m-5"))
    without_sink = [spouted.events, count.ack(to_count, counts), join.ack(to_join, joined)]
    rows = collect_events(*without_sink, sink.ack(counts), sink.ack(joined))

    tracker = Tracker(APP, clock=lambda: T0, acks=acks)
    t = {i: tracker.spout(f"m-{i}", source="q") for i in range(1, 6)}
    groups = [sorted([t[1], t[3]], key=lambda x: x.id), [t[2]]]
    aggregates = [tracker.emit(group, stage="count", position=0) for group in groups]
    for i in (1, 2, 3):
        tracker.ack(t[i], stage="count")
    pair = tracker.emit([t[4], t[5]], stage="join")
    tracker.ack(t[4], stage="join")
    tracker.ack(t[5], stage="join")
    before_sink = tracker.drain()
    expected = list(before_sink)
    # The sink acks the aggregates and the pair in two calls (in compact: two sets).
    for children in (aggregates, [pair]):
        for child in children:
            tracker.ack(child, stage="sink")
        expected += tracker.drain()

    assert keyed(rows) == keyed(expected)
    assert len(pair.roots) == len(aggregates[0].roots) == 2
    assert set(statuses(rows).values()) == {status.COMPLETED}
    # Without the sink's acks no root may look complete: a child of several roots is owed.
    partial = [r for r in rows if r["stage"] != "sink"]
    assert keyed(partial) == keyed(before_sink)
    assert set(statuses(partial).values()) == {status.PENDING}


@pytest.mark.parametrize("acks", ["compact", "per_tuple"])
def test_a_parent_anchored_twice_and_a_diamond_match_tracker(
    spark: SparkSession, acks: str
) -> None:
    spout, twice, left, right, sink = (
        StageTracker(APP, s, acks=acks) for s in ("spout", "twice", "left", "right", "sink")
    )
    spouted = spout.spout(
        spout_rows(spark, 2), message_id="id", source="q", to=["twice", "left", "right"]
    )
    tuples = spouted.tuples
    # Anchored twice to one parent: two edges, not a child id that cancels itself out.
    doubled = twice.emit(tuples, anchors=["_ackfold", "_ackfold"])
    # The diamond: left and right each get their own edge of every spout tuple, both emit to sink.
    from_left = left.emit(tuples, to=["sink"])
    from_right = right.explode(tuples, F.array(F.lit(1), F.lit(2)), "n", to=["sink"])
    # m-2's right branch is never acked by the sink: m-2 stays pending.
    sunk = from_left.unionByName(from_right.drop("n")).unionByName(doubled)
    sunk = sunk.where((F.col("id") == "m-1") | (F.col("_ackfold.stage") != "right"))
    rows = collect_events(
        spouted.events,
        twice.ack(tuples, doubled),
        left.ack(tuples, from_left),
        right.ack(tuples, from_right),
        sink.ack(sunk),
    )
    doubled_rows = {row.id: as_tuple(row["_ackfold"]) for row in doubled.collect()}
    with pytest.raises(Exception, match="stage 'other' is not a consumer of tuple"):
        StageTracker(APP, "other", acks=acks).ack(tuples).collect()

    tracker = Tracker(APP, clock=lambda: T0, acks=acks)
    for i in (1, 2):
        t = tracker.spout(f"m-{i}", source="q", to=["twice", "left", "right"])
        child = tracker.emit([t, t], stage="twice")
        tracker.ack(t, stage="twice")
        from_l = tracker.emit([t], stage="left", to=["sink"])
        tracker.ack(t, stage="left")
        from_r = [tracker.emit([t], stage="right", to=["sink"]) for _ in range(2)]
        tracker.ack(t, stage="right")
        for c in [child, from_l, *(from_r if i == 1 else [])]:
            tracker.ack(c, stage="sink")
        assert doubled_rows[f"m-{i}"] == child
        assert doubled_rows[f"m-{i}"].anchor_roots == (frozenset(t.roots),) * 2
    expected = tracker.drain()

    assert keyed(rows) == keyed(expected)
    m1, m2 = (ids.root_id(APP, f"q::m-{i}") for i in (1, 2))
    assert statuses(rows) == statuses(expected) == {m1: status.COMPLETED, m2: status.PENDING}


# -- sinks: an output no stage consumes keeps no tree open (invariant 12) --------------------


@pytest.mark.parametrize("acks", ["compact", "per_tuple"])
def test_a_tracked_aggregate_written_as_a_sink_completes_its_roots(
    spark: SparkSession, tmp_path: Path, acks: str
) -> None:
    """Job 2 counts job 1's words with `aggregate(..., to=[])` and writes the tracked counts
    as its final table: every root completes, as `Tracker` says, and a stage that reads the
    table later cannot ack them."""
    batch = spark.createDataFrame(
        [("m-1", "a b"), ("m-2", "b"), ("m-3", "c b")], "id string, text string"
    )
    spouted = StageTracker(APP, "spout").spout(batch, message_id="id", source="q")
    split, count = (StageTracker(APP, s, acks=acks) for s in ("split", "count"))
    words = split.explode(spouted.tuples, F.split("text", " "), "word").select("word", "_ackfold")
    counts = count.aggregate(words, "word", F.count("*").alias("n"), to=[])
    final = str(tmp_path / "counts")
    counts.write.format("delta").save(final)  # the sink's table, with its lineage
    rows = collect_events(
        spouted.events, split.ack(spouted.tuples, words), count.ack(words, counts)
    )

    tracker = Tracker(APP, clock=lambda: T0, acks=acks)
    by_word: dict[str, list[Tuple]] = defaultdict(list)
    for message_id, text in (("m-1", "a b"), ("m-2", "b"), ("m-3", "c b")):
        sentence = tracker.spout(message_id, source="q")
        for position, word in enumerate(text.split(" ")):
            by_word[word].append(tracker.emit([sentence], stage="split", position=position))
        tracker.ack(sentence, stage="split")
    expected = tracker.drain()
    for word_tuples in by_word.values():
        anchors = sorted(word_tuples, key=lambda t: t.id)
        tracker.emit(anchors, stage="count", position=0, to=[])
        for word_tuple in anchors:
            tracker.ack(word_tuple, stage="count")
    expected += tracker.drain()

    assert keyed(rows) == keyed(expected)
    assert set(statuses(rows).values()) == {status.COMPLETED}
    stored = {row.word: row for row in read(spark, final)}
    assert {w: row.n for w, row in stored.items()} == {"a": 1, "b": 3, "c": 1}
    assert {as_tuple(row._ackfold).consumers for row in stored.values()} == {()}
    assert len(as_tuple(stored["b"]._ackfold).roots) == 3
    later = spark.read.format("delta").load(final)
    for refused in (
        StageTracker(APP, "audit").ack(later),
        StageTracker(APP, "audit").fail(later, "x"),
    ):
        with pytest.raises(
            Exception, match=r"stage 'audit' cannot process tuple .*emitted to=\[\]"
        ):
            refused.collect()
    with pytest.raises(ValueError, match="would complete at once, unprocessed"):
        StageTracker(APP, "spout").spout(batch, message_id="id", source="q", to=[])


# -- writing: idempotent micro-batches, other writers ----------------------------------------


def word_batch(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([("m-1", "a b"), ("m-2", "c")], "id string, text string")


def test_a_rerun_batch_writes_its_outputs_once_and_changes_no_status(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Outputs carry the batch's transaction id: a re-run skips them. The ledger's rows do
    not (it would cost every batch Delta's transaction-id lookup): a re-run appends exact
    copies, same ids and values, which the fold reads once."""
    ledger = Ledger(str(tmp_path / "ledger"))
    words_path = str(tmp_path / "words")
    split = StageTracker(APP, "split", ledger=ledger)
    spout = StageTracker(APP, "spout", ledger=ledger)
    count = StageTracker(APP, "count", ledger=ledger)

    def run(batch: DataFrame, batch_id: int, *, crash_after_outputs: bool = False) -> None:
        lines = spout.spout(batch, message_id="id", source="test")
        words = split.explode(lines.tuples, F.split("text", " "), "word", to=["count"])
        words = words.select("word", "_ackfold")
        if crash_after_outputs:
            split.write_batch(batch_id, outputs={words_path: words})
            return
        split.write_batch(
            batch_id,
            outputs={words_path: words},
            roots=lines.roots,
            events=[lines.events, split.ack(lines.tuples, words)],
        )

    # Batch 0 crashes after its outputs; its re-run adds the ledger rows, not the words again.
    run(word_batch(spark), 0, crash_after_outputs=True)
    assert version(words_path) == 0
    run(word_batch(spark), 0)
    assert version(words_path) == 0
    tables = (words_path, ledger.path(ROOTS), ledger.path(ACK_EVENTS))
    first = [read(spark, path) for path in tables]
    assert [len(rows) for rows in first] == [3, 2, 4]  # 3 words; 2 roots; 2 inits + 2 acks
    assert set(statuses(first[2]).values()) == {status.PENDING}  # the words are not acked yet

    run(word_batch(spark), 0)  # the same batch again, as after a crash before the checkpoint
    assert version(words_path) == 0  # no output written twice
    events = read(spark, ledger.path(ACK_EVENTS))
    assert sorted(keyed(events)) == sorted(keyed(first[2]) * 2)  # exact copies, nothing else
    assert len(read(spark, ledger.path(ROOTS))) == 4
    assert set(statuses(events).values()) == {status.PENDING}

    count.write_batch(0, events=[count.ack(spark.read.format("delta").load(words_path))])
    done = read(spark, ledger.path(ACK_EVENTS))
    assert set(statuses(done).values()) == {status.COMPLETED}
    run(word_batch(spark), 0)  # a copy arriving after completion changes nothing either
    assert set(statuses(read(spark, ledger.path(ACK_EVENTS))).values()) == {status.COMPLETED}
    # The output table was declared, once for all those batches (issue 58).
    from ackfold.ledger.commits.outputs import read_declared
    from ackfold.ledger.schema.tables import DECLARED_OUTPUTS

    (declared,) = read_declared(ledger.root, app=APP)
    assert (declared.output, declared.origin_column) == (words_path, "origin_root_id")
    assert len(read(spark, ledger.path(DECLARED_OUTPUTS))) == 1


def test_delta_rs_appends_v1_rows_that_spark_reads(spark: SparkSession, tmp_path: Path) -> None:
    ledger = Ledger(str(tmp_path / "ledger"))
    spout = StageTracker(APP, "spout", ledger=ledger)
    lines = spout.spout(word_batch(spark), message_id="id", source="test")
    spout.write_batch(0, events=[lines.events])

    tracker = Tracker("other-app", clock=lambda: T0)
    tracker.spout("x-1", source="kafka")
    foreign = tracker.drain()
    # delta-rs aborts at interpreter exit half the time: write in a child that leaves with
    # os._exit, and judge it by its marker line, not only its exit code.
    script = textwrap.dedent(
        f"""
        import os, sys, pyarrow as pa
        from datetime import datetime, timezone
        from deltalake import write_deltalake
        rows = {[{**e, "event_time": e["event_time"].isoformat()} for e in foreign]!r}
        for row in rows:
            row["event_time"] = datetime.fromisoformat(row["event_time"])
        schema = pa.schema([
            pa.field("event_id", pa.string(), False), pa.field("app", pa.string(), False),
            pa.field("root_id", pa.int64(), False), pa.field("kind", pa.string(), False),
            pa.field("ack_val", pa.int64(), False), pa.field("stage", pa.string(), False),
            pa.field("event_time", pa.timestamp("us", tz="UTC"), False),
            pa.field("reason", pa.string(), True),
        ])
        write_deltalake({ledger.path(ACK_EVENTS)!r}, pa.Table.from_pylist(rows, schema=schema),
                        mode="append")
        print("APPENDED", flush=True)
        sys.stdout.flush()
        os._exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert "APPENDED" in done.stdout, done.stderr

    events = read(spark, ledger.path(ACK_EVENTS))
    assert sorted(e.app for e in events) == ["other-app", APP, APP]
    assert keyed(e for e in events if e.app == "other-app") == keyed(foreign)


def test_docstring_examples_run(spark: SparkSession) -> None:
    for module in (stage, child_verbs, columns, layout, sql_ids):
        result = doctest.testmod(module, extraglobs={"spark": spark}, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__


def test_the_workers_run_the_drivers_python(spark: SparkSession) -> None:
    """Whichever interpreter starts ackfold, PySpark's workers run the same one (a
    tracked stage's Python UDFs and pickled batches would otherwise meet another)."""

    @F.udf("string")
    def worker_python(_: int) -> str:
        import sys as worker_sys

        return f"{worker_sys.executable} {worker_sys.version_info[:2]}"

    (row,) = spark.range(1).select(worker_python("id").alias("python")).collect()
    assert row.python == f"{sys.executable} {sys.version_info[:2]}"
