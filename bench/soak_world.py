"""What the soak (bench/soak.py) runs against: the producers, the tracked Spark app, the
record of every event ever written, and the faults, all driven by one seed.

- `Producer`: a service outside Spark (`Tracker` and `LedgerWriter`) that registers a
  batch of roots every simulated hour, each with a fate drawn from the seed: processed,
  failed, an ack lost (it times out), an ack that comes hours late, or a batch committed
  twice. It also reads the replays back from its SQS queue and processes each attempt.
- `SparkApp`: a tracked Spark app (`StageTracker`) whose words table an older ackfold
  created in the first tuple layout: it keeps appending to it in that layout.
- `V1Producer`: a producer of contract v1 that knows nothing of ackfold: plain
  `deltalake.write_deltalake(mode="append")` of v1's columns (no `id_scheme`), and after
  `ackfold upgrade`, `schema_mode="merge"` as docs/ledger.md says.
- `Record`: every event any producer wrote, by root: what the reference fold reads; the
  roots with events since the last check (`dirty`), so the check folds only those again.
- `Faults`: the hooks on the ledger's fenced commits (`ackfold.ledger.commits.fence.COMMIT_HOOKS`)
  that kill a run at a commit point, or freeze it there while another host takes over;
  and a claim whose read of its table fails (a 503).
"""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ackfold.ledger.commits import fence
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.sources.base import ATTEMPT, ORIGIN_ROOT_ID
from ackfold.track.tracker import Tracker

# An event as the record keeps it: what the reference fold reads, in a tuple.
EVENT_KEYS = ("event_id", "app", "root_id", "kind", "ack_val", "stage", "event_time", "reason")


@dataclass
class Record:
    """Every event written, by root (duplicates too: the fold drops them), and which
    root is which app's and attempt."""

    events: dict[int, list[tuple[Any, ...]]] = field(default_factory=lambda: defaultdict(list))
    apps: dict[int, str] = field(default_factory=dict)
    dirty: set[int] = field(default_factory=set)
    written: int = 0

    def add(self, events: Iterable[dict[str, Any]]) -> None:
        for e in events:
            self.events[e["root_id"]].append(tuple(e[k] for k in EVENT_KEYS))
            self.apps.setdefault(e["root_id"], e["app"])
            self.dirty.add(e["root_id"])
            self.written += 1

    def of(self, root: int) -> list[dict[str, Any]]:
        return [dict(zip(EVENT_KEYS, e, strict=True)) for e in self.events[root]]

    def count(self) -> int:
        return self.written


class Producer:
    """One service outside Spark: its app, queue, writer and the next batch version."""

    def __init__(
        self, app: str, queue: str, writer: LedgerWriter, record: Record, rng: random.Random
    ) -> None:
        self.app, self.queue, self.writer, self.record, self.rng = app, queue, writer, record, rng
        self.version = 0
        self.sequence = 0
        self.scheme: int | None = None  # the id scheme of its roots, once read
        self.late: list[tuple[datetime, Any]] = []  # (when, tuple) of acks that come late
        self.fates: dict[str, int] = defaultdict(int)

    def produce(self, now: datetime, roots: int, *, killed: bool = False) -> None:
        """A batch of `roots` new roots at `now`, and the late acks due by then. `killed`:
        the producer dies between its commit of `roots` and of `ack_events`, and its
        restart writes the batch again under the same version (what is there is skipped)."""
        tracker = self._tracker(now)
        for _ in range(roots):
            self.sequence += 1
            root = tracker.spout(
                f"{self.app}-{self.sequence}", source="sqs", source_queue=self.queue,
                payload=f"message {self.sequence}",
            )  # fmt: skip
            self._process(tracker, root, now, first=True)
        due = [t for at, t in self.late if at <= now]
        self.late = [(at, t) for at, t in self.late if at > now]
        for child in due:
            tracker.ack(child, stage="store")
        self._commit(tracker, killed=killed)

    def consume(self, client: Any, url: str, now: datetime) -> int:
        """The replays waiting in this producer's queue: each a new attempt, registered
        before its message is deleted (invariant 6), then processed. How many."""
        messages = []
        while True:
            found = client.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                WaitTimeSeconds=0, VisibilityTimeout=60,
            ).get("Messages", [])  # fmt: skip
            if not found:
                break
            messages += found
        if not messages:
            return 0
        tracker = self._tracker(now)
        for message in messages:
            attrs = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
            root = tracker.spout(
                message["MessageId"], source="sqs", source_queue=self.queue,
                payload=message["Body"], attempt=int(attrs[ATTEMPT]),
                origin_root_id=int(attrs[ORIGIN_ROOT_ID]),
            )  # fmt: skip
            self._process(tracker, root, now, first=False)
        self._commit(tracker)
        for message in messages:
            client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return len(messages)

    def _tracker(self, now: datetime) -> Tracker:
        ticks = (now + timedelta(milliseconds=i) for i in range(10**7))
        # The id scheme its `roots` table records (text, before an upgrade), as
        # `Tracker(ledger=writer)` picks it: read once, and again after an upgrade.
        if self.scheme is None:
            self.scheme = self.writer.roots_scheme()
        return Tracker(self.app, clock=ticks.__next__, id_scheme=self.scheme)

    def _process(self, tracker: Tracker, root: Any, now: datetime, *, first: bool) -> None:
        """What happens to one root, by the seed: a replayed attempt mostly goes through."""
        draw = self.rng.random()
        if not first:
            draw = min(1.0, draw + 0.05) if draw > 0.1 else draw
        if draw < 0.04:
            tracker.fail(root, stage="split", reason="unparseable")
            self.fates["failed"] += 1
            return
        child = tracker.emit([root], stage="split")
        tracker.ack(root, stage="split")
        if draw < 0.08:  # lost: its child is never acked, it times out
            self.fates["lost"] += 1
        elif draw < 0.12:  # its child's ack comes hours late (after its timeout, mostly)
            self.late.append((now + timedelta(hours=self.rng.randint(1, 40)), child))
            self.fates["late"] += 1
        else:
            tracker.ack(child, stage="store")
            self.fates["processed"] += 1

    def _commit(self, tracker: Tracker, *, killed: bool = False) -> None:
        roots, events = tracker.drain_roots(), tracker.drain()
        self.version += 1
        app_id = f"{self.app}-producer"
        if killed:
            self.writer.append(roots, (), app_id=app_id, version=self.version)
        self.writer.append(roots, events, app_id=app_id, version=self.version)
        self.record.add(events)
        if self.rng.random() < 0.03:  # committed again (a retry after an answer lost)
            self.version += 1
            self.writer.append(roots, events, app_id=app_id, version=self.version)
            self.record.add(events)


class V1Producer:
    """A producer of contract v1 outside ackfold: its own 64-bit ids, a root tuple and one
    child per root (init, split's ack with the child's id, store's ack), with the same
    fates as `Producer`'s, appended with plain `write_deltalake`: v1's columns only, and
    `schema_mode="merge"` once `merge` is set (after `ackfold upgrade`). It never consumes
    its queue: a replayed root rests `replayed`."""

    def __init__(
        self, app: str, queue: str, root: str, storage: Any, record: Record, rng: random.Random
    ) -> None:
        self.app, self.queue, self.root, self.storage = app, queue, root.rstrip("/"), storage
        self.record, self.rng = record, rng
        self.sequence = 0
        self.merge = False
        self.late: list[tuple[datetime, dict[str, Any]]] = []
        self.fates: dict[str, int] = defaultdict(int)

    def produce(self, now: datetime, roots: int) -> None:
        rows: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        for _ in range(roots):
            self.sequence += 1
            name = f"{self.app}-{self.sequence}"
            root_id, tuple_id, child = (self.rng.getrandbits(64) - 2**63 for _ in range(3))
            rows.append({"root_id": root_id, "app": self.app, "attempt": 1,
                         "origin_root_id": root_id, "source": "sqs", "source_queue": self.queue,
                         "source_message_id": name, "source_position": None,
                         "payload": f"v1 message {self.sequence}", "ingested_at": now})  # fmt: skip

            def event(n: int, kind: str, ack_val: int, stage: str, at: datetime = now,
                      reason: str | None = None, root_id: int = root_id, name: str = name,
                      ) -> dict[str, Any]:  # fmt: skip
                return {"event_id": f"{name}-{n}", "app": self.app, "root_id": root_id,
                        "kind": kind, "ack_val": ack_val, "stage": stage, "event_time": at,
                        "reason": reason}  # fmt: skip

            events.append(event(0, "init", tuple_id, "spout"))
            draw = self.rng.random()
            if draw < 0.04:
                events.append(event(1, "fail", 0, "split", reason="unparseable"))
                self.fates["failed"] += 1
                continue
            events.append(event(1, "ack", tuple_id ^ child, "split"))
            store = event(2, "ack", child, "store")
            if draw < 0.08:
                self.fates["lost"] += 1
            elif draw < 0.12:
                at = now + timedelta(hours=self.rng.randint(1, 40))
                self.late.append((at, {**store, "event_time": at}))
                self.fates["late"] += 1
            else:
                events.append(store)
                self.fates["processed"] += 1
        events += [e for at, e in self.late if at <= now]
        self.late = [(at, e) for at, e in self.late if at > now]
        self._append("roots", rows)
        self._append("ack_events", events)
        self.record.add(events)

    def _append(self, table: str, rows: list[dict[str, Any]]) -> None:
        import pyarrow as pa
        from deltalake import DeltaTable, write_deltalake

        if not rows:
            return
        # Its DeltaTable kept and brought up to date, as a long-lived producer would keep
        # it: a path would open the table afresh at each append (a soak's 4%).
        kept = self.__dict__.setdefault("_tables", {})
        if table in kept:
            kept[table].update_incremental()
        else:
            kept[table] = DeltaTable(f"{self.root}/{table}", storage_options=self.storage)
        write_deltalake(
            kept[table],
            pa.Table.from_pylist(rows, V1_SCHEMAS[table]),
            mode="append",
            schema_mode="merge" if self.merge else None,
            storage_options=self.storage,
        )


def _v1_schemas() -> dict[str, Any]:
    import pyarrow as pa

    stamp = pa.timestamp("us", tz="UTC")
    text, big = pa.string(), pa.int64()
    return {
        "roots": pa.schema([("root_id", big), ("app", text), ("attempt", pa.int32()),
                            ("origin_root_id", big), ("source", text), ("source_queue", text),
                            ("source_message_id", text), ("source_position", text),
                            ("payload", text), ("ingested_at", stamp)]),
        "ack_events": pa.schema([("event_id", text), ("app", text), ("root_id", big),
                                 ("kind", text), ("ack_val", big), ("stage", text),
                                 ("event_time", stamp), ("reason", text)]),
    }  # fmt: skip


V1_SCHEMAS = _v1_schemas()


class Killed(BaseException):
    """A run killed at a commit point: nothing after it runs, nothing catches it."""


class Faults:
    """Hooks on the fenced commits of the runs: a kill, or a freeze, at the n-th."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plan: tuple[str, int, str, threading.Event | None] | None = None
        self._count = 0
        self.frozen = threading.Event()
        self.hits: dict[str, int] = defaultdict(int)

    @contextmanager
    def installed(self) -> Iterator[None]:
        fence.COMMIT_HOOKS.append(self._hook)
        try:
            yield
        finally:
            fence.COMMIT_HOOKS.remove(self._hook)

    @contextmanager
    def kill_at(self, commit: int, moment: str) -> Iterator[None]:
        """Kill the run at its `commit`-th fenced commit, `moment` ("before", "after")."""
        with self._planned(("kill", commit, moment, None)):
            yield

    @contextmanager
    def freeze_at(
        self, commit: int, wake: threading.Event, moment: str = "before"
    ) -> Iterator[None]:
        """Freeze the run `moment` ("before", "after") its `commit`-th fenced commit until
        `wake` is set."""
        self.frozen.clear()
        with self._planned(("freeze", commit, moment, wake)):
            yield

    @contextmanager
    def unreadable_claim(self) -> Iterator[None]:
        """The first claim's read of its table fails, once: delta-rs raises what a store
        that answers 503 makes it raise, inside the fence's own read (`fence.table_at`)."""
        real = fence.table_at
        done: list[str] = []

        def unreadable(uri: str) -> Any:
            raise OSError(f"Generic S3 error: 503 Service Unavailable (the soak) reading {uri}")

        def read(path: str, *, missing_ok: bool = False, what: str = "", **how: Any) -> Any:
            if not what.startswith("claim of") or done:
                return real(path, missing_ok=missing_ok, what=what, **how)
            done.append(path)
            self.hits[f"unreadable claim ({path.rsplit('/', 1)[-1]})"] += 1
            return real(path, missing_ok=missing_ok, what=what, read=unreadable)

        fence.table_at = read
        try:
            yield
        finally:
            fence.table_at = real

    @contextmanager
    def _planned(self, plan: tuple[str, int, str, threading.Event | None]) -> Iterator[None]:
        with self._lock:
            self._plan, self._count = plan, 0
        try:
            yield
        finally:
            with self._lock:
                self._plan = None

    def _hook(self, path: str, moment: str) -> None:
        with self._lock:
            plan = self._plan
            if plan is None:
                return
            if moment == "before":
                self._count += 1
            kind, commit, when, wake = plan
            if self._count != commit or moment != when:
                return
            self._plan = None
            self.hits[f"{kind} {when} commit {commit} ({path.rsplit('/', 1)[-1]})"] += 1
        if kind == "kill":
            raise Killed(f"killed {when} commit {commit} to {path}")
        assert wake is not None
        self.frozen.set()
        wake.wait(600)


def later(draw: Callable[[], float], start: datetime, days: int) -> datetime:
    """A moment within `days` after `start`, on the hour."""
    return start + timedelta(hours=int(draw() * days * 24))


# The words table as ackfold 0.1 wrote it: the first layout of `_ackfold`.
LAYOUT_1 = (
    "struct<id: bigint, roots: array<bigint>, anchor_roots: array<array<bigint>>, "
    "consumers: array<string>, anchors: array<bigint>, stage: string>"
)
WORDS = ("the cow jumped over the moon", "a b c", "storm spark delta", "x")


class SparkApp:
    """A tracked Spark app: `split` registers a batch of sentences (one root each, from an
    SQS queue, the payload kept for replays), explodes them into the words table, which an
    older ackfold made in the first tuple layout, and acks them (a sentence without text
    fails); `count` counts the batch's words into a sink table (`to=[]`) and acks them.
    Its events carry Spark's clock, not the soak's: the record reads them back."""

    app = "wordcount"

    def __init__(self, spark: Any, warehouse: str, queue: str, record: Record, rng: random.Random):
        from ackfold.track.stage import StageTracker

        self.spark, self.queue, self.record, self.rng = spark, queue, record, rng
        self.warehouse = warehouse
        self.words = f"{warehouse}/soak_words"
        self.counts = f"{warehouse}/soak_counts"
        self.spout = StageTracker(self.app, "spout", ledger=warehouse)
        self.split = StageTracker(self.app, "split", ledger=warehouse)
        self.count = StageTracker(self.app, "count", ledger=warehouse)
        self.batches = 0
        empty = spark.createDataFrame([], f"word string, _ackfold {LAYOUT_1}")
        empty.write.format("delta").mode("ignore").save(self.words)

    def run(self, sentences: int) -> None:
        from pyspark.sql import functions as F

        from ackfold.embedded.log import appended_since
        from ackfold.ledger.commits.marks import events_table
        from ackfold.ledger.schema.tables import Ledger

        before = int(events_table(Ledger(self.warehouse)).version())
        self.batches += 1
        rows = [
            (f"s-{self.batches}-{n}", None if self.rng.random() < 0.05 else self.rng.choice(WORDS))
            for n in range(sentences)
        ]
        batch = self.spark.createDataFrame(rows, "id string, text string")
        # The payload kept for a replay (SQS takes no empty message): the text, if any.
        payload = F.coalesce(F.col("text"), F.lit("(no text)"))
        read = self.spout.spout(
            batch, message_id="id", source="sqs", source_queue=self.queue, payload=payload
        )
        good = read.tuples.where(F.col("text").isNotNull())
        bad = read.tuples.where(F.col("text").isNull())
        words = self.split.explode(good, F.split("text", " "), "word").select("word", "_ackfold")
        self.split.write_batch(
            self.batches,
            outputs={self.words: words},
            roots=read.roots,
            events=[read.events, self.split.ack(good, words), self.split.fail(bad, "no text")],
        )
        counts = self.count.aggregate(words, "word", F.count("*").alias("n"), to=[])
        self.count.write_batch(
            self.batches, outputs={self.counts: counts}, events=[self.count.ack(words, counts)]
        )
        self._record(before, appended_since)

    def _record(self, before: int, appended_since: Any) -> None:
        """The events this batch wrote, read back from the ledger (Spark's event times)."""
        import pyarrow.dataset as ds

        from ackfold.ledger.schema.tables import ACK_EVENTS

        appends = appended_since(f"{self.warehouse}/{ACK_EVENTS}", before)
        if not appends.files:
            return
        paths = [f.uri.removeprefix("file://") for f in appends.files]
        rows = ds.dataset(paths, format="parquet").to_table().to_pylist()
        self.record.add([r for r in rows if r["app"] == self.app])
