"""The sink mistake, as a pipeline written from the docs makes it: a word count whose last
stage emits its final aggregate without `to=[]`, tracked by the real `Tracker`.

`count` acks every word and emits one count per distinct word, anchored to its words. With
`to=None` each count owes an ack to "any one stage", which never comes: every root with a
word stays open for ever. A sentence with no word has nothing for `count` and completes.
`healthy=True` is the same pipeline with `to=[]`, where every root completes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, ROOTS
from ackfold.reconcile.fold import classify, fold
from ackfold.track.tracker import Tracker
from tests.ledger_fixtures import Clock, state_row, write_rows

APP = "wc"
START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
TIMEOUT = timedelta(hours=1)
SENTENCES = ("the cat", "the dog and the cat", "", "a bird")


@dataclass
class WordCount:
    """The roots of one run of the word count, and the rows it wrote."""

    roots: list[int] = field(default_factory=list)
    empty: int = 0  # the root of the sentence with no word: it completes
    events: list[dict[str, Any]] = field(default_factory=list)
    registrations: list[dict[str, Any]] = field(default_factory=list)


def word_count(
    clock: Clock,
    sentences: tuple[str, ...] = SENTENCES,
    *,
    healthy: bool = False,
    first: int = 0,
    app: str = APP,
) -> WordCount:
    """One micro-batch of the word count: spout -> split -> count (compact acks)."""
    tracker = Tracker(app, clock=clock, acks="compact")
    run = WordCount()
    words: list[tuple[str, Any]] = []
    for n, sentence in enumerate(sentences, start=first):
        t = tracker.spout(f"m-{n}", source="sqs", source_queue="wc-in", payload=sentence)
        run.roots.append(t.roots[0])
        if not sentence:
            run.empty = t.roots[0]
        clock.tick()
        words += [(word, tracker.emit([t], stage="split")) for word in sentence.split()]
        tracker.ack(t, stage="split")
    clock.tick()
    by_word: dict[str, list[Any]] = {}
    for word, tuple_ in words:
        by_word.setdefault(word, []).append(tuple_)
    for occurrences in by_word.values():
        # The final table: no stage reads it. The mistake leaves out to=[].
        tracker.emit(occurrences, stage="count", to=[] if healthy else None)
    for _, tuple_ in words:
        tracker.ack(tuple_, stage="count")
    run.events = [dict(e) for e in tracker.drain()]
    run.registrations = [dict(r) for r in tracker.drain_roots()]
    return run


def reconciled_rows(
    events: list[dict[str, Any]], now: datetime, timeout: timedelta = TIMEOUT
) -> list[dict[str, Any]]:
    """`root_state` rows as a reconcile at `now` writes them (the reference fold)."""
    rows = []
    for root_id, folded in fold(events).items():
        root_status = classify(folded, now=now, timeout=timeout)
        rows.append(state_row(folded, root_status=root_status, attempt=1, origin_root_id=root_id))
    return rows


@dataclass
class SinkMistake:
    warehouse: str
    now: datetime
    stuck: int  # timed out at count
    fresh: int  # pending at count, not timed out yet
    empty: int  # completed: no word
    statuses: dict[int, str]


def sink_mistake_ledger(warehouse: str | Path) -> SinkMistake:
    """A ledger of the word count with the mistake: an hour-old run (timed out, but for
    the empty sentence) and a run of a minute ago (pending)."""
    clock = Clock(START)
    old = word_count(clock)
    clock.at(START + TIMEOUT + timedelta(minutes=30))
    new = word_count(clock, ("the end",), first=len(SENTENCES))
    now = clock.now + timedelta(minutes=1)
    events = old.events + new.events
    states = reconciled_rows(events, now)
    write_rows(warehouse, ROOTS, old.registrations + new.registrations)
    write_rows(warehouse, ACK_EVENTS, events)
    write_rows(warehouse, ROOT_STATE, states)
    statuses = {row["root_id"]: row["status"] for row in states}
    stuck = next(r for r in old.roots if r != old.empty)
    assert statuses[stuck] == status.TIMED_OUT
    assert statuses[old.empty] == status.COMPLETED
    assert statuses[new.roots[0]] == status.PENDING
    return SinkMistake(str(warehouse), now, stuck, new.roots[0], old.empty, statuses)
