"""A ledger that an older ackfold wrote (its `roots` table without `id_scheme`, its roots'
ids hashed from text, its tuples stored without a scheme) folds beside the rows of the
upgraded app on each engine: the old roots' trees finish in their own scheme, new roots
take the numeric one, a child of an old and a new root is derived as the old one's, and
every root ends where its events say."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema import ids, status
from ackfold.ledger.schema.schemes import NUMERIC, TEXT
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, ROOTS_V1_COLUMNS, Ledger
from ackfold.ledger.setup.upgrade import upgrade
from ackfold.track.layout import as_tuple
from ackfold.track.tracker import Tracker
from ackfold.track.tuples import Tuple
from tests.conformance.conftest import Reconcile, read, state
from tests.conftest import JARS_DIR
from tests.ledger_fixtures import Clock, arrow_schema

APP = "wordcount"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def stored(t: Tuple) -> Tuple:
    """`t` written to a table and read back by the upgraded app: a layout-1 struct, as
    ackfold 0.1 wrote it, without a scheme field."""
    return as_tuple({
        "id": t.id, "roots": list(t.roots), "anchor_roots": [sorted(r) for r in t.anchor_roots],
        "consumers": list(t.consumers), "anchors": [], "stage": t.stage,
    })  # fmt: skip


def test_an_old_ledger_folds_beside_the_upgraded_apps_rows(
    engine: str, reconcile: Reconcile, tmp_path: Path
) -> None:
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR, defaults={"timeout": "1h"})
    ledger = Ledger(settings.table_root)
    clock = Clock(T0)

    # Before the upgrade: every id from text; `roots` has contract v1's columns only.
    old = Tracker(APP, clock=clock, id_scheme=TEXT, acks="compact")
    done = old.spout("m-done", source="sqs")
    for w in [old.emit([done], stage="split") for _ in range(3)]:
        old.ack(w, stage="count")
    old.ack(done, stage="split")
    half = old.spout("m-half", source="sqs")  # split, not counted yet
    half_words = [old.emit([half], stage="split") for _ in range(2)]
    old.ack(half, stage="split")
    waiting = old.spout("m-wait", source="sqs")  # registered, not split yet
    v1 = pa.schema(list(arrow_schema(ROOTS))[:ROOTS_V1_COLUMNS])
    old_roots = [{k: r[k] for k in v1.names} for r in old.drain_roots()]
    write_deltalake(ledger.path(ROOTS), pa.Table.from_pylist(old_roots, v1))
    write_deltalake(
        ledger.path(ACK_EVENTS), pa.Table.from_pylist(old.drain(), arrow_schema(ACK_EVENTS))
    )

    # After it: the old roots' tuples come back from their tables without a scheme.
    clock.at(T0 + timedelta(minutes=1))
    new = Tracker(APP, clock=clock, acks="compact")
    for w in [stored(w) for w in half_words]:
        new.ack(w, stage="count")
    first = as_tuple({"id": ids.spout_tuple_id(_root(waiting)), "root": _root(waiting),
                      "anchor": None, "stage": "spout", "tree": None})  # fmt: skip
    assert first == waiting, "rebuilt from its roots row, in the text scheme"
    old_word = new.emit([first], stage="split")
    new.ack(first, stage="split")
    fresh = new.spout("m-new", source="sqs")
    new_word = new.emit([fresh], stage="split")
    new.ack(fresh, stage="split")
    assert (old_word.scheme, new_word.scheme) == (TEXT, NUMERIC)
    # A total of an old root's word and a new root's: derived as the old one's.
    total = new.emit([old_word, new_word], stage="count", to=[])
    assert total.scheme == TEXT
    new.ack(old_word, stage="count")
    new.ack(new_word, stage="count")
    lost = new.spout("m-lost", source="sqs")
    new.emit([lost], stage="split")
    new.ack(lost, stage="split")  # its word is never counted
    writer = LedgerWriter(ledger.root)
    # The numeric roots need the column: the operator's `ackfold upgrade` adds it (no
    # write does: the contract's tables change only by that command).
    assert upgrade(writer) == [f"{ledger.path(ROOTS)}: id_scheme INT"]
    writer.append(new.drain_roots(), new.drain())

    reconcile(settings, now=T0 + timedelta(minutes=5))
    statuses = {root: row["status"] for root, row in state(ledger).items()}
    assert statuses == {
        _root(done): status.COMPLETED,
        _root(half): status.COMPLETED,
        _root(waiting): status.COMPLETED,
        _root(fresh): status.COMPLETED,
        _root(lost): status.PENDING,
    }
    # The upgraded table: null (text) for the old roots.
    schemes: dict[str, Any] = {r["source_message_id"]: r["id_scheme"] for r in read(ledger, ROOTS)}
    assert schemes == {"m-done": None, "m-half": None, "m-wait": None, "m-new": 2, "m-lost": 2}


def _root(t: Tuple) -> int:
    (root,) = t.roots
    return root
