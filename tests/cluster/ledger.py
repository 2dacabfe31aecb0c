"""A small, varied ledger for the cluster tier, written without a JVM (delta-rs).

Two apps over two days (two `root_state` partitions), with every kind of root a reconcile
sorts: complete trees, failures, trees still open (pending or timed out, depending on
`NOW`), a replay chain, duplicated events, and events whose root never registered.
Events land in several commits, shuffled, so the executors read several files.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS
from ackfold.track.tracker import Tracker
from tests.ledger_fixtures import Clock, write_rows

DAY1 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)
# The reconcile's clock: roots opened in the last 5 minutes (the default timeout) are
# pending, older open ones timed out.
NOW = DAY2 + timedelta(hours=2)


def write_ledger(warehouse: Path, roots: int = 300, seed: int = 5) -> int:
    """Write `roots` roots (and their events) to `warehouse`; return the events written."""
    rng = random.Random(seed)
    clock = Clock(DAY1)
    trackers = {app: Tracker(app, clock=clock) for app in ("orders", "clicks")}
    root_rows, events = [], []
    for n in range(roots):
        day = DAY1 if n < roots // 2 else DAY2
        # The last roots start a minute before NOW: open ones among them are still pending.
        start = NOW - timedelta(minutes=1) if n >= roots - 20 else day
        clock.at(start + timedelta(seconds=37 * (n % 97)))
        tracker = trackers["orders" if n % 3 else "clicks"]
        fate = rng.random()
        sentence = tracker.spout(f"m-{n}", source="sqs", source_queue="in", payload=f'{{"n":{n}}}')
        clock.tick()
        words = [tracker.emit([sentence], stage="split") for _ in range(rng.randint(1, 4))]
        if fate < 0.08:
            tracker.fail(sentence, stage="split", reason=f"bad sentence {n}")
        else:
            tracker.ack(sentence, stage="split")
            clock.tick()
            open_tree = fate < 0.2
            for word in words[1:] if open_tree else words:
                tracker.ack(word, stage="count")
        if 0.08 <= fate < 0.12:
            # A replay of the failed-looking message: attempt 2 completes.
            retry = tracker.spout(
                f"m-{n}", source="sqs", source_queue="in", attempt=2,
                origin_root_id=sentence.roots[0], payload=f'{{"n":{n}}}',
            )  # fmt: skip
            clock.tick(30)
            tracker.ack(retry, stage="split")
        drained = tracker.drain()
        if fate > 0.95:
            events.append(dict(drained[-1]))  # delivered twice: dropped before the fold
        if fate > 0.98:
            drained = drained[1:]  # the init never came: the events wait, unmatched
        events.extend(drained)
        root_rows.extend(tracker.drain_roots())
    write_rows(warehouse, ROOTS, root_rows)
    rng.shuffle(events)
    for part in range(3):
        write_rows(warehouse, ACK_EVENTS, events[part::3])
    return len(events)
