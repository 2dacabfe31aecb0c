"""`LedgerWriter` and the contract's renderings, on real Delta tables written by delta-rs:
no JVM. That Spark's reconcile, replay, maintenance and quality take these tables is
`tests/sqs/test_outside_spark.py`."""

from __future__ import annotations

import doctest
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold import LedgerWriter, Tracker
from ackfold.ledger.commits import driver_writers, table_rows, writer
from ackfold.ledger.errors import SchemaMismatch
from ackfold.ledger.schema import contract, tables
from ackfold.ledger.schema.contract import (
    EVENT_KINDS,
    ContractError,
    arrow_schema,
    delta_schema,
    json_schema,
    json_schemas,
)
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, ROOTS, TABLE_PROPERTIES, TABLES
from tests.ledger_fixtures import Clock
from tests.ledger_fixtures import arrow_schema as fixture_arrow_schema

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _rows(app: str = "orders", n: int = 2) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tracker = Tracker(app, clock=Clock(T0))
    for i in range(n):
        t = tracker.spout(f"m-{i}", source="sqs", source_queue="in", payload=f'{{"i": {i}}}')
        if i % 2:
            tracker.fail(t, stage="store", reason="bad")
        else:
            tracker.ack(t, stage="store")
    return tracker.drain_roots(), tracker.drain()


def _read(path: str) -> list[dict[str, Any]]:
    return DeltaTable(path).to_pyarrow_table().to_pylist()


def _log(path: str, version: int) -> list[dict[str, Any]]:
    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


# -- create -------------------------------------------------------------------------------


def test_create_makes_every_table_as_spark_does(tmp_path: Path) -> None:
    w = LedgerWriter(tmp_path)
    assert w.create() == dict.fromkeys(TABLES, True)
    for name, (_, partitions, comment) in TABLES.items():
        path = w.ledger.path(name)
        actions = _log(path, 0)
        meta = next(a["metaData"] for a in actions if "metaData" in a)
        protocol = next(a["protocol"] for a in actions if "protocol" in a)
        # Exactly the schemaString Spark writes for the DDL: types, NOT NULLs, order.
        assert json.loads(meta["schemaString"]) == delta_schema(name)
        assert meta["partitionColumns"] == list(partitions)
        assert meta["description"] == comment
        assert meta["configuration"] == TABLE_PROPERTIES
        # What Delta Spark 4.4 writes for these tables; reader 1 keeps delta-rs reading.
        assert protocol == {"minReaderVersion": 1, "minWriterVersion": 2}
        assert DeltaTable(path).version() == 0
    actions = _log(w.ledger.path(ROOT_STATE), 0)
    root_state = json.loads(next(a["metaData"] for a in actions if "metaData" in a)["schemaString"])
    hashes = next(f for f in root_state["fields"] if f["name"] == "seen_event_hashes")
    assert hashes["type"] == {"type": "array", "elementType": "long", "containsNull": True}


def test_create_is_idempotent_and_commits_nothing_the_second_time(tmp_path: Path) -> None:
    w = LedgerWriter(tmp_path)
    assert w.create([ROOTS]) == {ROOTS: True}
    assert LedgerWriter(tmp_path).create() == {name: name != ROOTS for name in TABLES}
    assert LedgerWriter(tmp_path).create() == dict.fromkeys(TABLES, False)
    assert all(DeltaTable(w.ledger.path(name)).version() == 0 for name in TABLES)


def test_an_existing_table_with_another_type_is_a_clear_error(tmp_path: Path) -> None:
    w = LedgerWriter(tmp_path)
    schema = fixture_arrow_schema(ACK_EVENTS)
    wrong = schema.set(schema.get_field_index("ack_val"), pa.field("ack_val", pa.string(), False))
    write_deltalake(w.ledger.path(ACK_EVENTS), pa.Table.from_pylist([], wrong))
    with pytest.raises(SchemaMismatch, match=r"column 'ack_val' is \"string\", the contract says"):
        w.create([ACK_EVENTS])
    roots, events = _rows()
    with pytest.raises(SchemaMismatch, match="ack_val"):
        w.append(roots, events)
    # Both tables are checked before either is written: the roots did not go in alone.
    assert _read(w.ledger.path(ROOTS)) == []


def test_a_table_missing_a_contract_column_is_a_clear_error(tmp_path: Path) -> None:
    w = LedgerWriter(tmp_path)
    schema = fixture_arrow_schema(ROOTS)
    write_deltalake(
        w.ledger.path(ROOTS),
        pa.Table.from_pylist([], schema.remove(schema.get_field_index("payload"))),
    )
    with pytest.raises(SchemaMismatch, match=r"roots has no column 'payload'"):
        w.create([ROOTS])


def test_a_column_added_to_the_table_stays_null(tmp_path: Path) -> None:
    """The contract lets anyone add columns: rows from the writer leave them null."""
    w = LedgerWriter(tmp_path)
    schema = fixture_arrow_schema(ROOTS).append(pa.field("tenant", pa.string()))
    write_deltalake(w.ledger.path(ROOTS), pa.Table.from_pylist([], schema))
    roots, events = _rows()
    assert w.append(roots, events).roots == 2
    assert {row["tenant"] for row in _read(w.ledger.path(ROOTS))} == {None}
    not_null = fixture_arrow_schema(ROOTS).append(pa.field("tenant", pa.string(), False))
    other = LedgerWriter(tmp_path / "other")
    write_deltalake(other.ledger.path(ROOTS), pa.Table.from_pylist([], not_null))
    with pytest.raises(SchemaMismatch, match="'tenant' is NOT NULL and not in the contract"):
        other.create([ROOTS])


# -- append -------------------------------------------------------------------------------


def test_append_writes_the_trackers_rows_as_they_are(tmp_path: Path) -> None:
    roots, events = _rows(n=3)
    w = LedgerWriter(tmp_path)  # no create(): append makes what it needs
    assert w.append(roots, events) == writer.Appended(roots=3, events=3 + 3, skipped=())
    key = lambda row: (row["root_id"], row.get("event_id", ""))  # noqa: E731
    assert sorted(_read(w.ledger.path(ROOTS)), key=key) == sorted(roots, key=key)
    assert sorted(_read(w.ledger.path(ACK_EVENTS)), key=key) == sorted(events, key=key)
    assert not (tmp_path / ROOT_STATE).exists(), "append makes only the tables it writes"


def test_append_arrow_takes_a_trackers_columns_in_any_order_and_width(tmp_path: Path) -> None:
    """What `write_batch` hands over from Spark (`DataFrame.toArrow()`): the contract's
    columns, here reordered and with 64-bit ints where the table keeps 32, are cast to
    the table's schema; every row is written, copies too (the fold reads them once)."""
    _, events = _rows(n=2)
    w = LedgerWriter(tmp_path)
    data = pa.Table.from_pylist(events[::-1] + events[:1])
    w.append_arrow(ACK_EVENTS, data.select(data.column_names[::-1]))
    written = _read(w.ledger.path(ACK_EVENTS))
    key = lambda row: row["event_id"]  # noqa: E731
    assert sorted(written, key=key) == sorted(events + events[:1], key=key)


def test_append_arrow_refuses_a_row_that_breaks_a_not_null(tmp_path: Path) -> None:
    _, events = _rows(n=1)
    w = LedgerWriter(tmp_path)
    broken = pa.Table.from_pylist([{**events[0], "root_id": None}])
    with pytest.raises(Exception, match="root_id"):
        w.append_arrow(ACK_EVENTS, broken)
    assert _read(w.ledger.path(ACK_EVENTS)) == []


def test_appends_checkpoint_every_tenth_version_as_spark_does(tmp_path: Path) -> None:
    """delta-rs's own default is every 100th: readers would replay up to 100 commits."""
    w = LedgerWriter(tmp_path)
    for i in range(11):
        tracker = Tracker("orders", clock=Clock(T0))
        tracker.spout(f"m-{i}", source="sqs")
        w.append(tracker.drain_roots(), tracker.drain())
    log = tmp_path / ACK_EVENTS / "_delta_log"
    assert sorted(p.name for p in log.glob("*.checkpoint.parquet")) == [
        f"{10:020d}.checkpoint.parquet"
    ]
    assert len(_read(w.ledger.path(ACK_EVENTS))) == 11  # read back through the checkpoint


def test_roots_are_committed_before_their_events(tmp_path: Path) -> None:
    roots, events = _rows()
    w = LedgerWriter(tmp_path)
    w.append(roots, events)
    roots_at = DeltaTable(w.ledger.path(ROOTS)).history(1)[0]["timestamp"]
    events_at = DeltaTable(w.ledger.path(ACK_EVENTS)).history(1)[0]["timestamp"]
    assert roots_at <= events_at


def test_a_retried_version_writes_nothing_twice(tmp_path: Path) -> None:
    roots, events = _rows()
    w = LedgerWriter(tmp_path)
    assert w.append(roots, events, app_id="p", version=7) == writer.Appended(2, 4, ())
    retry = LedgerWriter(tmp_path).append(roots, events, app_id="p", version=7)
    assert retry == writer.Appended(0, 0, (ROOTS, ACK_EVENTS))
    # A lower version is done too (as Spark's txnVersion); another app id is not.
    assert w.append(roots, events, app_id="p", version=3).skipped == (ROOTS, ACK_EVENTS)
    assert len(_read(w.ledger.path(ROOTS))) == 2
    assert len(_read(w.ledger.path(ACK_EVENTS))) == 4
    more_roots, more_events = _rows(app="clicks", n=1)
    assert w.append(more_roots, more_events, app_id="p", version=8) == writer.Appended(1, 2, ())
    assert DeltaTable(w.ledger.path(ROOTS)).transaction_version("p") == 8
    assert DeltaTable(w.ledger.path(ACK_EVENTS)).transaction_version("p") == 8
    assert DeltaTable(w.ledger.path(ROOTS)).transaction_version("other") is None


def test_a_retry_after_a_crash_between_the_tables_writes_only_the_events(
    tmp_path: Path,
) -> None:
    roots, events = _rows()
    w = LedgerWriter(tmp_path)
    w.append(roots, (), app_id="p", version=1)  # the roots' commit, then the crash
    assert w.append(roots, events, app_id="p", version=1) == writer.Appended(0, 4, (ROOTS,))
    assert len(_read(w.ledger.path(ROOTS))) == 2


def test_without_an_app_id_an_append_is_not_idempotent_but_events_are_unique_per_call(
    tmp_path: Path,
) -> None:
    roots, events = _rows()
    w = LedgerWriter(tmp_path)
    assert w.append(roots, events + events).events == 4  # one row per event_id
    w.append(roots, events)
    assert len(_read(w.ledger.path(ACK_EVENTS))) == 8
    assert w.append((), ()) == writer.Appended(0, 0, ())


@pytest.mark.parametrize(
    ("table", "change", "message"),
    [
        (ROOTS, {"app": None}, "roots row 1: column 'app' is NOT NULL, got no value"),
        (ACK_EVENTS, {"stage": None}, "ack_events row 1: column 'stage' is NOT NULL"),
        (ROOTS, {"root_id": "17"}, "column 'root_id' (BIGINT) must be an int in the signed"),
        (ROOTS, {"root_id": True}, "column 'root_id' (BIGINT) must be an int"),
        (ROOTS, {"root_id": 2**63}, "column 'root_id' (BIGINT) must be an int in the signed 64"),
        (ROOTS, {"attempt": 2**31}, "column 'attempt' (INT) must be an int in the signed 32"),
        (
            ACK_EVENTS,
            {"event_time": datetime(2026, 3, 1)},
            "column 'event_time' (TIMESTAMP) must be a datetime with a time zone, got datetime",
        ),
        (ACK_EVENTS, {"kind": "done"}, "column 'kind' must be one of init, ack, fail, got 'done'"),
        (ACK_EVENTS, {"extra": 1}, "ack_events row 1: unknown column 'extra'; the columns are"),
        (ROOTS, {"payload": b"card 4111"}, "column 'payload' (STRING) must be a str, got bytes"),
    ],
)
def test_a_row_outside_the_contract_is_named_and_nothing_is_written(
    tmp_path: Path, table: str, change: dict[str, Any], message: str
) -> None:
    roots, events = _rows()
    rows = roots if table == ROOTS else events
    rows[1] = {**rows[1], **change}
    with pytest.raises(ContractError, match=re.escape(message)):
        LedgerWriter(tmp_path).append(roots, events, app_id="p", version=1)
    assert not (tmp_path / ROOTS).exists()
    assert not (tmp_path / ACK_EVENTS).exists()


def test_an_error_never_quotes_a_payload(tmp_path: Path) -> None:
    roots, events = _rows()
    roots[0] = {**roots[0], "payload": ["card 4111 1111 1111 1111"]}
    with pytest.raises(ContractError) as caught:
        LedgerWriter(tmp_path).append(roots, events)
    assert "4111" not in str(caught.value)


def test_times_in_any_zone_are_stored_as_the_same_instant(tmp_path: Path) -> None:
    roots, events = _rows()
    paris = timezone(timedelta(hours=1))
    events[0] = {**events[0], "event_time": T0.astimezone(paris)}
    w = LedgerWriter(tmp_path)
    w.append(roots, events)
    times = {row["event_id"]: row["event_time"] for row in _read(w.ledger.path(ACK_EVENTS))}
    assert times[events[0]["event_id"]] == T0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"app_id": "p"}, "pass app_id and version together"),
        ({"version": 1}, "pass app_id and version together"),
        ({"app_id": " ", "version": 1}, "app_id must be a non-empty string"),
        ({"app_id": "p", "version": -1}, "version must be an int >= 0, got -1"),
        ({"app_id": "p", "version": True}, "version must be an int >= 0, got True"),
    ],
)
def test_bad_transaction_arguments_are_refused(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        LedgerWriter(tmp_path).append(*_rows(), **kwargs)


def test_an_unknown_table_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown ledger table 'events'"):
        LedgerWriter(tmp_path).create(["events"])


# -- the contract's renderings ------------------------------------------------------------


def test_json_schema_is_valid_2020_12_and_takes_the_trackers_rows() -> None:
    roots, events = _rows()
    for table, rows in ((ROOTS, roots), (ACK_EVENTS, events)):
        schema = json_schema(table)
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
        )
        for row in rows:
            as_json = json.loads(json.dumps(row, default=datetime.isoformat))
            validator.validate(as_json)
            missing = {k: v for k, v in as_json.items() if k != "app"}
            assert not validator.is_valid(missing)
            assert not validator.is_valid({**as_json, "root_id": "1"})
            assert not validator.is_valid({**as_json, "extra": 1})
    event = json.loads(json.dumps(events[0], default=datetime.isoformat))
    validator = jsonschema.Draft202012Validator(json_schema(ACK_EVENTS))
    assert not validator.is_valid({**event, "kind": "done"})
    assert validator.is_valid({k: v for k, v in event.items() if k != "reason"})
    bundle = json_schemas(list(TABLES))
    jsonschema.Draft202012Validator.check_schema(bundle)
    assert set(bundle["$defs"]) == set(TABLES)
    ref = {"$schema": contract.JSON_SCHEMA_DIALECT, "$ref": "#/$defs/roots", **bundle}
    assert jsonschema.Draft202012Validator(ref).is_valid(
        json.loads(json.dumps(roots[0], default=datetime.isoformat))
    )


def test_the_arrow_schema_is_what_delta_rs_reads_back(tmp_path: Path) -> None:
    w = LedgerWriter(tmp_path)
    w.create()
    for name in TABLES:
        on_disk = pa.schema(DeltaTable(w.ledger.path(name)).schema().to_arrow())
        assert arrow_schema(name) == on_disk
    for name in (ROOTS, ACK_EVENTS):  # what the test fixtures write, too
        assert arrow_schema(name) == fixture_arrow_schema(name)


def test_create_sql_is_what_spark_runs() -> None:
    sql = tables.create_sql(ROOT_STATE, "delta.`/w/root_state`")
    assert sql.startswith("CREATE TABLE IF NOT EXISTS delta.`/w/root_state` (\n    root_id")
    assert "PARTITIONED BY (first_event_date, status)" in sql
    assert "COMMENT 'folded state and status per root'" in sql
    for key, value in TABLE_PROPERTIES.items():
        assert f"'{key}' = '{value}'" in sql


def test_a_tracker_writes_exactly_the_contracts_event_kinds() -> None:
    tracker = Tracker("orders")
    done = tracker.spout("order-1", source="sqs", source_queue="orders", payload="{}")
    tracker.ack(done, stage="store")
    bad = tracker.spout("order-2", source="sqs", source_queue="orders", payload="{}")
    tracker.fail(bad, stage="parse", reason="bad json")
    assert sorted({event["kind"] for event in tracker.drain()}) == sorted(EVENT_KINDS)


def test_doctests() -> None:
    for module in (contract, writer, table_rows):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_the_driver_commits_a_local_warehouse_unless_its_session_is_spark_connect(
    tmp_path: Path,
) -> None:
    # Told from the session's class alone: the ledger does not import ackfold.spark.
    connect = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
    classic = type("SparkSession", (), {"__module__": "pyspark.sql.session"})()
    ledger = tables.Ledger(str(tmp_path))
    assert driver_writers.driver_writer(connect, ledger) is None  # type: ignore[arg-type]
    found = driver_writers.driver_writer(classic, ledger)  # type: ignore[arg-type]
    assert found is not None
    assert found.ledger == ledger
