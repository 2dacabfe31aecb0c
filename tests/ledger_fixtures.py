"""Small real Delta ledgers for tests that read the ledger without a JVM.

The tables are written by `deltalake.write_deltalake` with the exact schemas of
`ackfold.ledger.schema.tables` (parsed from its DDL, so a column added there shows up here),
the same table properties, and `root_state` partitioned by `first_event_date`. Events and `roots`
rows come from the real `Tracker`; `root_state` rows from the reference `fold`, with the
status each scenario needs. The Spark tier writes the same tables with Spark.

Example:
    >>> arrow_schema("root_state").field("first_event_date")
    pyarrow.Field<first_event_date: date32[day] not null>
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from ackfold.ledger.schema import ids, status
from ackfold.ledger.schema.ids import event_hash
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ROOT_STATE,
    ROOTS,
    TABLE_PROPERTIES,
    TABLES,
    Ledger,
)
from ackfold.reconcile.fold import RootFold, fold
from ackfold.track.tracker import Tracker

_TYPES: dict[str, pa.DataType] = {
    "STRING": pa.string(),
    "BIGINT": pa.int64(),
    "INT": pa.int32(),
    "BOOLEAN": pa.bool_(),
    "DOUBLE": pa.float64(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "ARRAY<STRING>": pa.list_(pa.string()),
    "ARRAY<BIGINT>": pa.list_(pa.int64()),
}
_COLUMN = re.compile(r"^(\w+)\s+(\S+)(\s+NOT NULL)?$")


def arrow_schema(table: str) -> pa.Schema:
    """The arrow schema of ledger table `table`, from its DDL in `ackfold.ledger.schema.tables`."""
    ddl = TABLES[table][0]
    columns = []
    for item in ddl.strip().split(","):
        match = _COLUMN.match(" ".join(item.split()))
        if match is None or match.group(2) not in _TYPES:
            raise ValueError(f"cannot map the DDL column {item.strip()!r} of {table} to arrow")
        name, kind, not_null = match.groups()
        columns.append(pa.field(name, _TYPES[kind], nullable=not_null is None))
    return pa.schema(columns)


def write_rows(warehouse: str | Path, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append `rows` (dicts by column name; missing nullable columns are null) to `table`.

    Creates the table on the first write. Each call is one commit and at least one file
    (one per `first_event_date` for `root_state`).
    """
    schema = arrow_schema(table)
    append_arrow(
        warehouse,
        table,
        pa.Table.from_pylist([{n: row.get(n) for n in schema.names} for row in rows], schema),
    )


def append_columns(
    warehouse: str | Path, table: str, columns: Mapping[str, pa.Array], rows: int
) -> None:
    """Append `rows` rows given as arrow `columns` (the others null) to `table`: the
    columnar `write_rows`, for ledgers of millions of rows."""
    schema = arrow_schema(table)
    append_arrow(
        warehouse,
        table,
        pa.table({f.name: columns.get(f.name) or pa.nulls(rows, f.type) for f in schema}, schema),
    )


def append_arrow(warehouse: str | Path, table: str, data: pa.Table) -> None:
    """One commit of `data` to `table`, partitioned and with the ledger's table properties."""
    partitions = TABLES[table][1]
    write_deltalake(
        Ledger(str(warehouse)).path(table),
        data,
        mode="append",
        partition_by=list(partitions) or None,
        configuration=dict(TABLE_PROPERTIES),
    )


def state_row(
    folded: RootFold,
    *,
    root_status: str,
    attempt: int,
    origin_root_id: int,
    status_changed_at: datetime | None = None,
    reconciled_at: datetime | None = None,
) -> dict[str, Any]:
    """A `root_state` row as a reconcile would write it for `folded`."""
    assert root_status in status.ALL
    return {
        "root_id": folded.root_id,
        "app": folded.app,
        "status": root_status,
        "xor_acc": folded.xor_acc,
        "event_count": folded.event_count,
        "first_event_at": folded.first_event_at,
        "last_event_at": folded.last_event_at,
        "status_changed_at": status_changed_at or folded.last_event_at,
        "attempt": attempt,
        "origin_root_id": origin_root_id,
        "last_stage": folded.last_stage,
        "fail_reason": folded.fail_reason,
        "fail_stage": folded.fail_stage,
        "fail_at": folded.fail_at,
        "init_seen": folded.init_seen,
        "seen_event_hashes": sorted(event_hash(e) for e in folded.seen_event_ids),
        "reconciled_at": reconciled_at or folded.last_event_at + timedelta(minutes=1),
        "first_event_date": folded.first_event_at.astimezone(UTC).date(),
    }


class Clock:
    """A settable clock for `Tracker`: `at(...)` jumps, `tick(...)` advances."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def at(self, now: datetime) -> None:
        self.now = now

    def tick(self, seconds: float = 1.0) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Sample:
    """The sample ledger: which root is which, and what the tables hold."""

    warehouse: str
    completed: int = 0  # orders: spout -> parse -> sink; long payload; one duplicate event
    replayed: int = 0  # orders attempt 1: failed at sink, then replayed
    retry: int = 0  # orders attempt 2 of `replayed`: completed
    timed_out: int = 0  # clicks (kafka): init only, timed out
    dead: int = 0  # clicks: failed at enrich, no attempts left
    pending: int = 0  # orders, the newest: init folded, one more event not reconciled
    unreconciled: int = 0  # orders: registered and has events, no root_state row yet
    payload: str = ""  # the payload of `completed`
    statuses: dict[int, str] = field(default_factory=dict)
    events: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    # What gets written, one commit per table at the end.
    rows: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {ROOTS: [], ACK_EVENTS: [], ROOT_STATE: []}
    )


DAY1 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
DAY2 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
DAY3 = datetime(2026, 11, 22, 11, 0, tzinfo=UTC)


def sample_ledger(warehouse: str | Path) -> Sample:
    """Write the sample ledger: two apps, three days (three `first_event_date` partitions),
    every status but `completed_late`, one replay chain. One commit per table."""
    sample = Sample(warehouse=str(warehouse))
    clock = Clock(DAY1)
    orders = Tracker("orders", clock=clock)
    clicks = Tracker("clicks", clock=clock)
    sample.payload = '{"order": 1, "lines": [' + ", ".join(['{"sku": "x"}'] * 60) + "]}"

    # Day 1: a completed order, and an order that fails at the sink.
    t = orders.spout("m-1", source="sqs", source_queue="orders-in", payload=sample.payload)
    clock.tick()
    line = orders.emit([t], stage="parse")
    orders.ack(t, stage="parse")
    clock.tick()
    orders.ack(line, stage="sink")
    sample.completed = t.roots[0]

    clock.at(DAY1 + timedelta(minutes=10))
    t = orders.spout("m-2", source="sqs", source_queue="orders-in", payload='{"order": 2}')
    clock.tick()
    line = orders.emit([t], stage="parse")
    orders.ack(t, stage="parse")
    clock.tick()
    orders.fail(line, stage="sink", reason="bad record: missing field 'sku'")
    sample.replayed = t.roots[0]
    day1 = _day(sample, [orders, clicks])
    _write_day(
        sample,
        day1,
        {sample.completed: (status.COMPLETED, 1), sample.replayed: (status.REPLAYED, 1)},
        origins={sample.completed: sample.completed, sample.replayed: sample.replayed},
    )

    # Day 2: the replay completes; a click times out; a re-delivered event of day 1.
    clock.at(DAY2)
    t = orders.spout(
        "m-2",
        source="sqs",
        source_queue="orders-in",
        attempt=2,
        origin_root_id=sample.replayed,
        payload='{"order": 2}',
    )
    clock.tick(2)
    line = orders.emit([t], stage="parse")
    orders.ack(t, stage="parse")
    clock.tick(3)
    orders.ack(line, stage="sink")
    sample.retry = t.roots[0]

    clock.at(DAY2 + timedelta(hours=2))
    t = clicks.spout("c-9", source="kafka", source_queue="clicks", source_position="clicks:0:42")
    sample.timed_out = t.roots[0]
    day2 = _day(sample, [orders, clicks])
    duplicate = dict(sample.events[sample.completed][-1])
    sample.events[sample.completed].append(duplicate)
    day2["events"].append(duplicate)
    _write_day(
        sample,
        day2,
        {sample.retry: (status.COMPLETED, 2), sample.timed_out: (status.TIMED_OUT, 1)},
        origins={sample.retry: sample.replayed, sample.timed_out: sample.timed_out},
    )

    # Day 3: a click dead-lettered, a pending order, and an order not yet reconciled.
    clock.at(DAY3)
    t = clicks.spout("c-7", source="kafka", source_queue="clicks", source_position="clicks:1:7")
    clock.tick()
    clicks.fail(t, stage="enrich", reason="geo lookup failed\n\x1b[31mred\x1b[0m")
    sample.dead = t.roots[0]

    clock.at(DAY3 + timedelta(hours=1))
    t = orders.spout("m-3", source="sqs", source_queue="orders-in")
    sample.pending = t.roots[0]
    day3 = _day(sample, [orders, clicks])
    _write_day(
        sample,
        day3,
        {sample.dead: (status.DEAD_LETTERED, 1), sample.pending: (status.PENDING, 1)},
        origins={sample.dead: sample.dead, sample.pending: sample.pending},
    )

    # After the last reconcile: the pending order moves on, a new order arrives.
    clock.tick(5)
    orders.emit([t], stage="parse")
    orders.ack(t, stage="parse")
    clock.tick(5)
    t = orders.spout("m-4", source="sqs", source_queue="orders-in")
    sample.unreconciled = t.roots[0]
    late = _day(sample, [orders, clicks])
    sample.rows[ROOTS].extend(late["roots"])
    sample.rows[ACK_EVENTS].extend(late["events"])
    for table, rows in sample.rows.items():
        write_rows(warehouse, table, rows)
    return sample


def _day(sample: Sample, trackers: Iterable[Tracker]) -> dict[str, list[dict[str, Any]]]:
    """Drain the trackers: the day's `roots` rows and events, also kept per root."""
    day: dict[str, list[dict[str, Any]]] = {"roots": [], "events": []}
    for tracker in trackers:
        day["roots"].extend(dict(row) for row in tracker.drain_roots())
        for event in tracker.drain():
            row = dict(event)
            day["events"].append(row)
            sample.events.setdefault(row["root_id"], []).append(row)
    return day


def _write_day(
    sample: Sample,
    day: Mapping[str, list[dict[str, Any]]],
    states: Mapping[int, tuple[str, int]],
    *,
    origins: Mapping[int, int],
) -> None:
    folds = fold([e for root in states for e in sample.events[root]])
    rows = []
    for root, (root_status, attempt) in states.items():
        rows.append(
            state_row(
                folds[root], root_status=root_status, attempt=attempt, origin_root_id=origins[root]
            )
        )
        sample.statuses[root] = root_status
    sample.rows[ROOTS].extend(day["roots"])
    sample.rows[ACK_EVENTS].extend(day["events"])
    sample.rows[ROOT_STATE].extend(rows)


def bulk_ledger(
    warehouse: str | Path,
    *,
    roots_per_day: int = 1000,
    days: int = 5,
    start: datetime = datetime(2026, 10, 1, tzinfo=UTC),
    apps: Sequence[str] = ("orders", "clicks"),
    statuses: Callable[[int], str] = lambda i: status.ALL[i % len(status.ALL)],
) -> list[list[int]]:
    """A larger ledger, written column by column (no Tracker): per day one commit per
    table, so one `root_state` partition and one `roots`/`ack_events` file per day, in
    time order like real appends. Every root has an init and a matching ack (XOR 0).
    Returns the root ids of each day."""
    per_day: list[list[int]] = []
    for day in range(days):
        base = start + timedelta(days=day)
        roots, events, states = [], [], []
        day_ids = []
        for i in range(roots_per_day):
            n = day * roots_per_day + i
            app = apps[n % len(apps)]
            root = ids.hash64("bulk", app, n)
            day_ids.append(root)
            at = base + timedelta(seconds=i * 86400 // roots_per_day)
            done = at + timedelta(seconds=30)
            value = ids.hash64("bulk-tuple", n)
            roots.append(
                {
                    "root_id": root,
                    "app": app,
                    "attempt": 1,
                    "origin_root_id": root,
                    "source": "sqs",
                    "source_queue": f"{app}-in",
                    "source_message_id": f"m-{n}",
                    "payload": f'{{"n": {n}}}',
                    "ingested_at": at,
                }
            )
            init = ids.event_id(app, root, "init", "spout", value)
            ack = ids.event_id(app, root, "ack", "sink", value)
            events.append(_event(init, app, root, "init", value, "spout", at))
            events.append(_event(ack, app, root, "ack", value, "sink", done))
            states.append(
                {
                    "root_id": root,
                    "app": app,
                    "status": statuses(n),
                    "xor_acc": 0,
                    "event_count": 2,
                    "first_event_at": at,
                    "last_event_at": done,
                    "status_changed_at": done,
                    "attempt": 1,
                    "origin_root_id": root,
                    "last_stage": "sink",
                    "init_seen": True,
                    "seen_event_hashes": [event_hash(init), event_hash(ack)],
                    "reconciled_at": done,
                    "first_event_date": at.date(),
                }
            )
        write_rows(warehouse, ROOTS, roots)
        write_rows(warehouse, ACK_EVENTS, events)
        write_rows(warehouse, ROOT_STATE, states)
        per_day.append(day_ids)
    return per_day


def _event(
    event_id: str, app: str, root: int, kind: str, value: int, stage: str, at: datetime
) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "app": app,
        "root_id": root,
        "kind": kind,
        "ack_val": value,
        "stage": stage,
        "event_time": at,
        "reason": None,
    }


def partition_dates(warehouse: str | Path) -> list[date]:
    """The distinct `first_event_date` partitions of `root_state` (each holds a partition
    per status), for pruning assertions."""
    from deltalake import DeltaTable

    table = DeltaTable(Ledger(str(warehouse)).path(ROOT_STATE))
    return sorted({date.fromisoformat(str(p["first_event_date"])) for p in table.partitions()})
