"""The ``_ackfold`` column's layout is versioned (``ackfold.track.layout``).

Layout 2 writes the common case (one root, one anchor, any one consumer) without
arrays. Tables written by ackfold 0.1 in layout 1 are read as the Python ``Tracker``
says, an app upgraded in place keeps appending to them in their layout, and a column of
no known layout is refused with an error that says why.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackfold.ledger.schema.schemes import NUMERIC, TEXT
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS_DDL, Ledger, column_specs
from ackfold.track.layout import as_tuple, layout_of
from ackfold.track.stage import StageTracker
from ackfold.track.tracker import Tracker
from ackfold.track.tuples import Tuple

APP = "wordcount"
KEY = ("event_id", "app", "root_id", "kind", "ack_val", "stage", "reason")
# The struct as ackfold 0.1 wrote it, spelled out here rather than taken from the library.
LAYOUT_1 = (
    "struct<id: bigint, roots: array<bigint>, anchor_roots: array<array<bigint>>, "
    "consumers: array<string>, anchors: array<bigint>, stage: string>"
)
SENTENCES = (("m-1", "a b"), ("m-2", "b"), ("m-3", "c b"))
T0 = datetime(2024, 1, 1, tzinfo=UTC)
ROOTS_SPECS = column_specs(ROOTS_DDL)


def keyed(rows: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(row[k] for k in KEY) for row in rows)


def layout_1_words(spark: SparkSession, tracker: Tracker, path: str) -> list[Tuple]:
    """Split SENTENCES with ``tracker`` and write the words as ackfold 0.1 did; returns
    the word tuples, in row order."""
    rows, words = [], []
    for message_id, text in SENTENCES:
        sentence = tracker.spout(message_id, source="q")
        for position, word in enumerate(text.split(" ")):
            t = tracker.emit([sentence], stage="split", position=position)
            words.append(t)
            anchor_roots = [sorted(roots) for roots in t.anchor_roots]
            rows.append((word, (t.id, list(t.roots), anchor_roots, list(t.consumers),
                                [sentence.id], "split")))  # fmt: skip
        tracker.ack(sentence, stage="split")
    frame = spark.createDataFrame(rows, f"word string, _ackfold {LAYOUT_1}")
    frame.write.format("delta").save(path)
    return words


@pytest.mark.parametrize("acks", ["compact", "per_tuple"])
def test_a_layout_1_table_is_read_as_the_tracker_says(
    spark: SparkSession, tmp_path: Path, acks: str
) -> None:
    """A stage reading ackfold 0.1's words acks them, and aggregates them into a sink's
    table, with exactly the events ``Tracker`` writes for the same topology."""
    path = str(tmp_path / "words")
    tracker = Tracker(APP, acks=acks, id_scheme=TEXT)  # as 0.1 derived ids
    words = layout_1_words(spark, tracker, path)
    tracker.drain()
    stored = spark.read.format("delta").load(path)
    assert layout_of(stored.schema["_ackfold"].dataType) == 1

    count = StageTracker(APP, "count", acks=acks)
    counts = count.aggregate(stored, "word", F.count("*").alias("n"), to=[])
    rows = count.ack(stored, counts).collect()

    by_word: dict[str, list[Tuple]] = {}
    for (_, text), word in zip(
        ((m, w) for m, t in SENTENCES for w in t.split(" ")), words, strict=True
    ):
        by_word.setdefault(text, []).append(word)
    for group in by_word.values():
        tracker.emit(sorted(group, key=lambda t: t.id), stage="count", position=0, to=[])
        for word in group:
            tracker.ack(word, stage="count")
    assert keyed(rows) == keyed(tracker.drain())
    assert {as_tuple(row._ackfold).id for row in stored.collect()} == {w.id for w in words}


def test_an_upgraded_app_appends_to_its_layout_1_table_in_layout_1(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The words table keeps the layout it started with: new words go in as layout 1,
    with the ids the Tracker gives them, and a reader sees old and new alike."""
    path = str(tmp_path / "words")
    ledger = Ledger(str(tmp_path / "ledger"))
    old = layout_1_words(spark, Tracker(APP, id_scheme=TEXT), path)

    spout = StageTracker(APP, "spout", ledger=ledger)
    split = StageTracker(APP, "split", ledger=ledger)
    batch = spark.createDataFrame([("m-9", "d e")], "id string, text string")
    lines = spout.spout(batch, message_id="id", source="q")
    new = split.explode(lines.tuples, F.split("text", " "), "word").select("word", "_ackfold")
    assert layout_of(new.schema["_ackfold"].dataType) == 2
    split.write_batch(
        0,
        outputs={path: new},
        roots=lines.roots,
        events=[lines.events, split.ack(lines.tuples, new)],
    )

    stored = spark.read.format("delta").load(path)
    assert layout_of(stored.schema["_ackfold"].dataType) == 1
    # The table gained the scheme field: old words read as text ids, new ones as numeric.
    assert {(r.word in ("d", "e"), r._ackfold.scheme) for r in stored.collect()} == {
        (False, None),
        (True, NUMERIC),
    }
    tracker = Tracker(APP)
    sentence = tracker.spout("m-9", source="q")
    expected = [tracker.emit([sentence], stage="split", position=i) for i in range(2)]
    tuples = [as_tuple(row._ackfold) for row in stored.orderBy("word").collect()]
    assert sorted(tuples, key=lambda t: t.id) == sorted([*old, *expected], key=lambda t: t.id)

    # The count stage acks old and new words alike: m-9's root completes.
    events = spark.read.format("delta").load(ledger.path(ACK_EVENTS))
    acks = StageTracker(APP, "count").ack(stored.where(F.col("word").isin("d", "e")))
    acc = 0
    for e in events.unionByName(acks.select(*events.columns)).collect():
        acc ^= e.ack_val
    assert acc == 0


def test_layout_1_rows_appended_to_a_layout_2_table_go_in_as_layout_2(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Rows copied from an old table into a new one take the new table's layout."""
    old, new = str(tmp_path / "old"), str(tmp_path / "new")
    words = layout_1_words(spark, Tracker(APP, id_scheme=TEXT), old)
    spouted = StageTracker(APP, "spout").spout(
        spark.createDataFrame([("m-9", "d")], "id string, text string"),
        message_id="id",
        source="q",
    )
    split = StageTracker(APP, "split", ledger=str(tmp_path / "ledger"))
    split.explode(spouted.tuples, F.split("text", " "), "word").select(
        "word", "_ackfold"
    ).write.format("delta").save(new)

    split.write_batch(0, outputs={new: spark.read.format("delta").load(old)})

    stored = spark.read.format("delta").load(new)
    assert layout_of(stored.schema["_ackfold"].dataType) == 2
    ids = {as_tuple(row._ackfold).id for row in stored.collect()}
    assert {w.id for w in words} < ids
    assert len(ids) == len({w.id for w in words}) + 1


def test_the_common_case_is_short_and_the_general_case_carries_its_tree(
    spark: SparkSession,
) -> None:
    spouted = StageTracker(APP, "spout").spout(
        spark.createDataFrame(list(SENTENCES), "id string, text string"),
        message_id="id",
        source="q",
    )
    split = StageTracker(APP, "split")

    def fields(frame: DataFrame) -> set[tuple[bool, bool]]:
        return {(r._ackfold.root is not None, r._ackfold.tree is not None) for r in frame.collect()}

    assert fields(spouted.tuples) == {(True, False)}
    assert fields(split.explode(spouted.tuples, F.split("text", " "), "w")) == {(True, False)}
    named = split.explode(spouted.tuples, F.split("text", " "), "w", to=["count", "audit"])
    assert fields(named) == {(False, True)}
    pair = spouted.tuples.alias("l").crossJoin(spouted.tuples.alias("r")).limit(1)
    joined = split.emit(pair.select(F.col("l._ackfold").alias("a"), F.col("r._ackfold").alias("b")),
                        anchors=["a", "b"])  # fmt: skip
    assert fields(joined) == {(False, True)}


def test_a_column_of_no_known_layout_is_refused(spark: SparkSession) -> None:
    alien = spark.createDataFrame([(1, (7, "x"))], "n int, _ackfold struct<id: bigint, x: string>")
    with pytest.raises(ValueError, match=r"no tuple layout this ackfold reads .*newer ackfold"):
        StageTracker(APP, "count").ack(alien)


def test_an_app_upgraded_in_place_finishes_its_old_roots_and_starts_new_ones(
    spark: SparkSession, tmp_path: Path
) -> None:
    """An SQS app of an older ackfold left a `roots` table without `id_scheme` and a
    `words` table in layout 2 without a scheme. The upgraded app starts and leaves `roots`
    as it is (only `ackfold upgrade` adds the column); after the upgrade it gives the
    output table the new field, rebuilds the old roots' first tuples in their text scheme,
    registers new roots in the numeric one, and every root completes."""
    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.ledger.schema.tables import ROOTS, ROOTS_V1_COLUMNS
    from ackfold.ledger.setup.create import CREATED, create_tables
    from ackfold.ledger.setup.upgrade import upgrade
    from ackfold.reconcile.fold import fold

    ledger = Ledger(str(tmp_path / "ledger"))
    words_path = str(tmp_path / "words")
    old = Tracker(APP, id_scheme=TEXT, acks="compact")
    split_one = old.spout("m-1", source="sqs")  # split before the upgrade
    old_words = [old.emit([split_one], stage="split", position=i) for i in range(2)]
    old.ack(split_one, stage="split")
    old.spout("m-2", source="sqs")  # registered before the upgrade, split after it
    v1 = ", ".join(f"{n} {k}" for n, k, _ in ROOTS_SPECS[:ROOTS_V1_COLUMNS])
    v1_rows = [tuple(r[n] for n, _, _ in ROOTS_SPECS[:ROOTS_V1_COLUMNS]) for r in old.drain_roots()]
    spark.createDataFrame(v1_rows, v1).write.format("delta").save(ledger.path(ROOTS))
    layout_2 = "id bigint, root bigint, anchor bigint, stage string, tree " + (
        "struct<roots: array<bigint>, anchor_roots: array<array<bigint>>, "
        "consumers: array<string>, anchors: array<bigint>>"
    )
    spark.createDataFrame(
        [
            (f"w{i}", (w.id, w.roots[0], split_one.id, "split", None))
            for i, w in enumerate(old_words)
        ],
        f"word string, _ackfold struct<{layout_2}>",
    ).write.format("delta").save(words_path)
    events = old.drain()

    CREATED.discard(ledger.path(ROOTS))
    create_tables(spark, ledger, (ROOTS,))  # the upgraded app's start: no schema change
    assert len(spark.read.format("delta").load(ledger.path(ROOTS)).columns) == ROOTS_V1_COLUMNS
    assert upgrade(LedgerWriter(ledger.root)) == [f"{ledger.path(ROOTS)}: id_scheme INT"]
    stored = spark.read.format("delta").load(ledger.path(ROOTS))
    assert [r.id_scheme for r in stored.collect()] == [None, None]
    spout, split, count = (StageTracker(APP, s, ledger=ledger) for s in ("spout", "split", "count"))
    fresh = spout.spout(spark.createDataFrame([("m-3",)], "id string"), message_id="id",
                        source="sqs")  # fmt: skip
    spout.write_batch(None, roots=fresh.roots, events=[fresh.events])
    roots = spark.read.format("delta").load(ledger.path(ROOTS)).where("source_message_id <> 'm-1'")
    sentences = spout.registered(roots).withColumn("text", F.lit("a b"))
    items = F.split("text", " ")
    new_words = split.explode(sentences, items, "word").select("word", "_ackfold")
    split.write_batch(0, outputs={words_path: new_words},
                      events=[split.ack(sentences, exploded=items)])  # fmt: skip

    words = spark.read.format("delta").load(words_path)
    assert {(r.word, r._ackfold.scheme) for r in words.collect()} == {
        ("w0", None),
        ("w1", None),
        ("a", TEXT),
        ("b", TEXT),
        ("a", NUMERIC),
        ("b", NUMERIC),
    }
    events += spark.read.format("delta").load(ledger.path(ACK_EVENTS)).collect()
    events += count.ack(words).collect()
    # The fold of every event, their times pinned (Spark's clock is real).
    rows = [e if isinstance(e, dict) else e.asDict() for e in events]
    folds = fold([{**{k: e[k] for k in KEY}, "event_time": T0} for e in rows])
    assert len(folds) == 3
    assert all(f.init_seen and f.xor_acc == 0 for f in folds.values()), folds


def test_a_contract_v1_roots_table_gets_text_roots_from_spark_and_keeps_its_layout(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A `roots` table that a contract-v1 producer made (no `id_scheme`): the Spark spout
    registers its roots there in the text scheme, with one warning naming the upgrade,
    and appends them without the column; a Spark append of numeric roots is refused
    before it writes. The table's schema never changes."""
    import logging

    from deltalake import DeltaTable

    from ackfold.ledger.errors import SchemaMismatch
    from ackfold.ledger.schema.tables import ROOTS, ROOTS_V1_COLUMNS
    from ackfold.reconcile.fold import fold
    from ackfold.track.write import _commit
    from tests.contract_v1 import now_utc, write_v1_ledger

    ledger = Ledger(str(tmp_path / "ledger"))
    write_v1_ledger(Path(ledger.root), now_utc())
    roots_table = DeltaTable(ledger.path(ROOTS))
    version = roots_table.version()

    spout = StageTracker(APP, "spout", ledger=ledger)
    batch = spark.createDataFrame([("s-1",), ("s-2",)], "id string")
    with caplog.at_level(logging.WARNING, logger="ackfold.ledger.setup.upgrade"):
        out = spout.spout(batch, message_id="id", source="sqs")
    assert {r.id_scheme for r in out.roots.collect()} == {TEXT}
    assert any("ackfold upgrade" in r.getMessage() for r in caplog.records)
    spout.write_batch(None, roots=out.roots, events=[out.events])
    # As an SQS app reads them back: rows of the v1 table, rebuilt in the text scheme.
    registered = spark.read.format("delta").load(ledger.path(ROOTS))
    sentences = spout.registered(registered.where("source_message_id LIKE 's-%'"))
    split = StageTracker(APP, "split", ledger=ledger)
    split.write_batch(None, events=[split.ack(sentences)])
    stored = DeltaTable(ledger.path(ROOTS))
    assert len(stored.schema().fields) == ROOTS_V1_COLUMNS
    assert stored.version() == version + 1
    # The new roots complete in the scheme the table reads them in (null: text).
    events = spark.read.format("delta").load(ledger.path(ACK_EVENTS))
    mine = [r.asDict() for r in events.where("stage IN ('spout', 'split')").collect()]
    new = {r.root_id for r in out.roots.collect()}
    folds = fold(
        [{**{k: e[k] for k in KEY}, "event_time": T0} for e in mine if e["root_id"] in new]
    )
    assert len(folds) == 2
    assert all(f.init_seen and f.xor_acc == 0 for f in folds.values())

    # A Spark append (a Connect session on this warehouse, HDFS) of numeric roots.
    numeric = StageTracker(APP, "spout", id_scheme=NUMERIC)  # no ledger: cannot ask it
    rows = numeric.spout(spark.createDataFrame([("n-1",)], "id string"), message_id="id",
                         source="sqs").roots  # fmt: skip
    with pytest.raises(SchemaMismatch, match="ackfold upgrade"):
        _commit(spark, ledger, None, ROOTS, rows)
    assert DeltaTable(ledger.path(ROOTS)).version() == version + 1
    text = StageTracker(APP, "spout", id_scheme=TEXT)
    rows = text.spout(spark.createDataFrame([("t-1",)], "id string"), message_id="id",
                      source="sqs").roots  # fmt: skip
    _commit(spark, ledger, None, ROOTS, rows)
    stored = DeltaTable(ledger.path(ROOTS))
    assert (stored.version(), len(stored.schema().fields)) == (version + 2, ROOTS_V1_COLUMNS)
