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
- **Statistics where a reader filters**, on `ack_events`: `root_id` and `event_time`
  (`ackfold show`, the pending lookups, a Z-ordered table) keep their min and max in
  each file, in its page index and in the Delta log; `app`, `kind`, `stage` and
  `reason` per column chunk only (a micro-batch's file is one page a column, where a
  page index repeats the chunk's). None on `event_id` and `ack_val`: hashes spread over
  the whole range, so their min and max skip no file, and no reader filters on them.

Every reader of the ledger reads these encodings: Spark's parquet reader, delta-rs,
DuckDB (the embedded engine) and pyarrow. The same properties go to delta-rs's rewrites
(the maintenance's Z-order, compaction and retention without Spark). Spark's writes of
ledger rows (its appends through Spark Connect on a local warehouse or on HDFS, the
maintenance's retention and OPTIMIZE) get Zstandard too; its parquet writer keeps its
own encodings (36 bytes a compact row, against 52 in Snappy).
(`docs/decisions/lean-commits.md`, issue 40)

Example:
    >>> import pyarrow as pa
    >>> clustered("ack_events", pa.table({"root_id": [3, 1, 2]})).column("root_id").to_pylist()
    [1, 2, 3]
    >>> writer_properties("ack_events").compression
    'ZSTD(1)'
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from importlib.metadata import version
from typing import TYPE_CHECKING, Any, Final

from ackfold.ledger.schema.tables import ACK_EVENTS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SPARK_LEDGER_OPTIONS", "clustered", "spark_codec", "writer_properties"]

log = logging.getLogger("ackfold.ledger")

CODEC: Final = "ZSTD"
LEVEL: Final = 1

# Options of Spark's appends of ledger rows (`DataFrameWriter.option`): the same codec.
SPARK_LEDGER_OPTIONS: Final = {"compression": CODEC.lower()}
# What Spark's rewrites (OPTIMIZE), which take no write options, compress with.
SPARK_CODEC_CONF: Final = "spark.sql.parquet.compression.codec"


def writer_properties(name: str) -> Any:
    """The delta-rs ``WriterProperties`` of a commit to ledger table `name`."""
    from deltalake import ColumnProperties, WriterProperties

    if name != ACK_EVENTS:
        return WriterProperties(compression=CODEC, compression_level=LEVEL)

    chosen = _column_encodings()

    def plain(encoding: str, statistics: str) -> ColumnProperties:
        options: dict[str, Any] = {"dictionary_enabled": False, "statistics_enabled": statistics}
        if chosen:
            options["encoding"] = encoding
        return ColumnProperties(**options)

    return WriterProperties(
        compression=CODEC,
        compression_level=LEVEL,
        default_column_properties=ColumnProperties(statistics_enabled="CHUNK"),
        column_properties={
            "event_id": plain("DELTA_LENGTH_BYTE_ARRAY", statistics="NONE"),
            "ack_val": plain("PLAIN", statistics="NONE"),
            "root_id": plain("DELTA_BINARY_PACKED", statistics="PAGE"),
            "event_time": plain("DELTA_BINARY_PACKED", statistics="PAGE"),
        },
    )


@cache
def _column_encodings() -> bool:
    """Whether this deltalake sets a column's parquet encoding (1.2 and later). Without
    it, `ack_events` files keep delta-rs's default encodings: the same values, in larger
    files (about 57 bytes a compact row rather than 34)."""
    import inspect

    from deltalake import ColumnProperties

    if "encoding" in inspect.signature(ColumnProperties.__init__).parameters:
        return True
    log.warning(
        "deltalake %s cannot choose parquet encodings (1.2 can): ledger files are written "
        "larger than they need be; upgrade deltalake to shrink them",
        version("deltalake"),
    )
    return False


def clustered(name: str, data: Any) -> Any:
    """The Arrow table `data` in the order ledger table `name` stores its rows: by
    `root_id` for `ack_events`, as given for the other tables."""
    if name != ACK_EVENTS or "root_id" not in data.column_names:
        return data
    return data.sort_by("root_id")


@contextmanager
def spark_codec(spark: SparkSession) -> Iterator[None]:
    """Spark's parquet files written inside this block are Zstandard, as the ledger's
    others; the session's own codec is back after it."""
    before = spark.conf.get(SPARK_CODEC_CONF, None)
    spark.conf.set(SPARK_CODEC_CONF, CODEC.lower())
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(SPARK_CODEC_CONF)
        else:
            spark.conf.set(SPARK_CODEC_CONF, before)
