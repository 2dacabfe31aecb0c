"""How `LedgerWriter` lays out the ledger's parquet files (`ackfold.ledger.schema.encoding`): the
same rows, in fewer bytes, still read alike by delta-rs, DuckDB and pyarrow, with the
statistics that data skipping uses. That Spark reads them is
`tests/spark/test_tracking.py::test_delta_rs_appends_v1_rows_that_spark_reads`."""

from __future__ import annotations

import doctest
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from ackfold import LedgerWriter, Tracker
from ackfold.ledger.schema import encoding
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS
from tests.ledger_fixtures import Clock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _batch(n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A spout batch of `n` messages, as the ingester registers it: roots and init events."""
    tracker = Tracker("wordcount", clock=Clock(T0))
    for i in range(n):
        tracker.spout(f"m-{i}", source="sqs", source_queue="in", payload=f'{{"i": {i}}}')
    return tracker.drain_roots(), tracker.drain()


def _files(table: Path) -> list[pq.ParquetFile]:
    return [pq.ParquetFile(path) for path in sorted(table.glob("*.parquet"))]


def _columns(file: pq.ParquetFile) -> dict[str, Any]:
    group = file.metadata.row_group(0)
    chunks = (group.column(i) for i in range(group.num_columns))
    return {chunk.path_in_schema: chunk for chunk in chunks}


def test_an_ack_events_file_stores_a_compact_row_in_under_40_bytes(tmp_path: Path) -> None:
    """delta-rs's defaults took 57 bytes a row (Snappy, dictionaries, a page index): the
    32-digit `event_id` alone took 34. Its entropy is 16 bytes, `ack_val`'s 8."""
    roots, events = _batch(1000)
    LedgerWriter(tmp_path).append(roots, events)
    (path,) = (tmp_path / ACK_EVENTS).glob("*.parquet")
    assert pq.ParquetFile(path).metadata.num_rows == 1000
    assert path.stat().st_size / 1000 < 40


def test_ack_events_rows_are_ordered_by_root_id_and_zstd_compressed(tmp_path: Path) -> None:
    roots, events = _batch(50)
    writer = LedgerWriter(tmp_path)
    writer.append(roots, events)
    backwards = sorted(events, key=lambda event: event["root_id"], reverse=True)
    writer.append_arrow(ACK_EVENTS, pa.Table.from_pylist(backwards))  # as Spark hands them
    files = _files(tmp_path / ACK_EVENTS)
    assert len(files) == 2
    for file in files:
        ids = file.read().column("root_id").to_pylist()
        assert ids == sorted(ids)
        assert {chunk.compression for chunk in _columns(file).values()} == {"ZSTD"}
    # Every ledger table is Zstandard; only `ack_events` is reordered.
    (roots_file,) = _files(tmp_path / ROOTS)
    assert {chunk.compression for chunk in _columns(roots_file).values()} == {"ZSTD"}
    assert roots_file.read().column("root_id").to_pylist() == [r["root_id"] for r in roots]


def test_the_unique_columns_go_without_a_dictionary(tmp_path: Path) -> None:
    roots, events = _batch(100)
    LedgerWriter(tmp_path).append(roots, events)
    (file,) = _files(tmp_path / ACK_EVENTS)
    columns = _columns(file)
    encodings = {name: set(chunk.encodings) for name, chunk in columns.items()}
    assert "DELTA_LENGTH_BYTE_ARRAY" in encodings["event_id"]
    assert "DELTA_BINARY_PACKED" in encodings["root_id"]
    assert "DELTA_BINARY_PACKED" in encodings["event_time"]
    for name in ("event_id", "root_id", "ack_val", "event_time"):
        assert not columns[name].has_dictionary_page, name
    assert columns["stage"].has_dictionary_page  # a repeated value keeps its dictionary


def test_filtered_columns_keep_their_statistics_and_hashes_have_none(tmp_path: Path) -> None:
    """`root_id` and `event_time` are what `ackfold show` and the pending lookups filter
    on: their min and max stay in the file, its page index and the Delta log. A hash's
    min and max skip nothing; they are not written."""
    roots, events = _batch(100)
    writer = LedgerWriter(tmp_path)
    writer.append(roots, events)
    (file,) = _files(tmp_path / ACK_EVENTS)
    columns = _columns(file)
    for name in ("root_id", "event_time", "app", "stage", "kind"):
        assert columns[name].is_stats_set, name
        assert columns[name].statistics.has_min_max, name
    for name in ("event_id", "ack_val"):
        assert not columns[name].is_stats_set, name
    assert columns["root_id"].has_column_index
    assert columns["event_time"].has_column_index
    assert not columns["stage"].has_column_index
    table = DeltaTable(writer.uri(ACK_EVENTS))
    (add,) = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    ids = [e["root_id"] for e in events]
    assert (add["min.root_id"], add["max.root_id"]) == (min(ids), max(ids))
    assert add["min.event_time"] == T0
    # A point lookup, as `ackfold show` makes it, finds its row.
    assert _query(tmp_path, f"root_id = {max(ids) + 1}") == []
    assert [r["event_id"] for r in _query(tmp_path, f"root_id = {ids[7]}")] == [
        events[7]["event_id"]
    ]


def _query(warehouse: Path, where: str) -> list[dict[str, Any]]:
    from ackfold.ledger.reading.reader import LedgerReader

    return LedgerReader(str(warehouse)).query(ACK_EVENTS, ["event_id"], [where])


def test_duckdb_and_pyarrow_read_back_the_trackers_rows(tmp_path: Path) -> None:
    """The embedded engine reads the files with DuckDB; the CLI and UI with delta-rs."""
    roots, events = _batch(30)
    writer = LedgerWriter(tmp_path)
    writer.append(roots, events)
    (path,) = (tmp_path / ACK_EVENTS).glob("*.parquet")
    key = lambda row: row["event_id"]  # noqa: E731
    by_duckdb = duckdb.sql(f"SELECT * FROM read_parquet('{path}')").fetch_arrow_table().to_pylist()
    by_delta_rs = DeltaTable(writer.uri(ACK_EVENTS)).to_pyarrow_table().to_pylist()
    assert sorted(by_duckdb, key=key) == sorted(by_delta_rs, key=key) == sorted(events, key=key)
    assert json.loads(json.dumps(encoding.SPARK_LEDGER_OPTIONS)) == {"compression": "zstd"}


def test_doctests() -> None:
    assert doctest.testmod(encoding).failed == 0
