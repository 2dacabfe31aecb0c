"""How the ledger's parquet files are encoded: the one place that sets the writer
properties of the rows delta-rs commits (`LedgerWriter`), and the options of Spark's
appends of `roots` and `ack_events` (`ackfold.track.write`).

Nothing here changes a column, a type or an id: only how the same values are laid out
in a file. Measured on the word count's ledger (`bench/wordcount.py`, compact acks, a
micro-batch of 1,000 messages a file) an `ack_events` row took 57 bytes with delta-rs's
defaults (Snappy, a dictionary on every column, a page index), 34 bytes with these:

- **Zstandard** on every ledger table. `event_id` is 32 hex digits, 16 bytes of entropy
  that Snappy, which has no entropy coding, stores as 34; Zstandard's Huffman literals
  store them in 16.3. Level 1: the ids leave nothing for a higher level to find (it
  measured the same or larger), and it costs the least time per commit.
- **No dictionary on the unique columns of `ack_events`.** `event_id`, `root_id` and
  `ack_val` hardly repeat within a compact batch's file, so a dictionary is every value
  plus an index. `event_id` goes as DELTA_LENGTH_BYTE_ARRAY (the lengths apart, then the
  digits alone, which Zstandard codes best); `ack_val` (random 64 bits) as PLAIN.
- **Rows ordered by `root_id`** within each `ack_events` file, with `root_id` and
  `event_time` as DELTA_BINARY_PACKED: sorted ids store as their gaps (7 bytes rather
  than 8), and a per-tuple file's repeats of a root cost next to nothing.
- **Statistics per column chunk, no page index**, on `ack_events`: a file of a
  micro-batch is one page per column, so a page index repeats the chunk's min and max.
  None at all on `event_id` and `ack_val`: hashes spread over the whole range, so their
  min and max skip no file, and no reader filters on them. `root_id`, `event_time`,
  `app`, `stage` and `kind` keep theirs in each file and in the Delta log, for data
  skipping (`ackfold show`, the pending lookups, a Z-ordered table).

Every reader of the ledger reads these encodings: Spark's parquet reader, delta-rs,
DuckDB (the embedded engine) and pyarrow. Spark's own appends (Spark Connect on a local
warehouse, HDFS) get Zstandard too; its parquet writer keeps its own encodings.
(`docs/decisions/lean-commits.md`, issue 40)

Example:
    >>> import pyarrow as pa
    >>> clustered("ack_events", pa.table({"root_id": [3, 1, 2]})).column("root_id").to_pylist()
    [1, 2, 3]
    >>> writer_properties("ack_events").compression
    'ZSTD(1)'
"""

from __future__ import annotations

from typing import Any, Final

from ackfold.ledger.tables import ACK_EVENTS

__all__ = ["SPARK_LEDGER_OPTIONS", "clustered", "writer_properties"]

CODEC: Final = "ZSTD"
LEVEL: Final = 1

# Options of Spark's appends of ledger rows (`DataFrameWriter.option`): the same codec.
SPARK_LEDGER_OPTIONS: Final = {"compression": CODEC.lower()}


def writer_properties(name: str) -> Any:
    """The delta-rs ``WriterProperties`` of a commit to ledger table `name`."""
    from deltalake import ColumnProperties, WriterProperties

    if name != ACK_EVENTS:
        return WriterProperties(compression=CODEC, compression_level=LEVEL)

    def plain(encoding: str, statistics: bool) -> ColumnProperties:
        return ColumnProperties(
            dictionary_enabled=False,
            encoding=encoding,  # type: ignore[arg-type]
            statistics_enabled="CHUNK" if statistics else "NONE",
        )

    return WriterProperties(
        compression=CODEC,
        compression_level=LEVEL,
        default_column_properties=ColumnProperties(statistics_enabled="CHUNK"),
        column_properties={
            "event_id": plain("DELTA_LENGTH_BYTE_ARRAY", statistics=False),
            "ack_val": plain("PLAIN", statistics=False),
            "root_id": plain("DELTA_BINARY_PACKED", statistics=True),
            "event_time": plain("DELTA_BINARY_PACKED", statistics=True),
        },
    )


def clustered(name: str, data: Any) -> Any:
    """The Arrow table `data` in the order ledger table `name` stores its rows: by
    `root_id` for `ack_events`, as given for the other tables."""
    if name != ACK_EVENTS or "root_id" not in data.column_names:
        return data
    return data.sort_by("root_id")
