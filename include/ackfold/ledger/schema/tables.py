"""The ledger's Delta tables: names, explicit schemas and layout
(`ackfold.ledger.setup.create` creates them from Spark).

The v1 columns of `ack_events` and `roots` are a public contract (DESIGN.md): any Delta
writer may append them. Tables stay at reader version 1 (no deletion vectors, no column
mapping) so delta-rs can read them for the CLI and the UI without a JVM.

Layout, for the real access pattern:
- `ack_events` and `roots` are append-only and unpartitioned. Appends arrive in time
  order, so each file covers a narrow time range and time filters skip files; Z-ordering
  them by `root_id` (maintenance) makes point lookups (`ackfold show`) skip files too.
- `root_state` is partitioned by `first_event_date`, then `status`. A reconcile reads the
  partitions of the roots still open (`pending`, `timed_out`, `failed`, wherever they sit
  in time) and the ids of the roots first seen within `reconcile.lookback`; it never
  reads settled history (invariant 9). A status change moves a row to its new partition,
  so counting roots by status reads file metadata, not rows.

Example:
    >>> from ackfold.ledger.schema.tables import Ledger
    >>> ledger = Ledger("/tmp/warehouse")
    >>> ledger.path("ack_events")
    '/tmp/warehouse/ack_events'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ackfold.ledger.schema.operational import (
    ALERT_LOG_DDL,
    APP_PROGRESS_DDL,
    DEAD_LETTERS_DDL,
    DECLARED_OUTPUTS_DDL,
    QUALITY_RESULTS_DDL,
    REPLAY_LOG_DDL,
    RETRACT_LOG_DDL,
    SENT_MESSAGES_DDL,
)

ACK_EVENTS = "ack_events"
ROOTS = "roots"
ROOT_STATE = "root_state"
UNMATCHED_EVENTS = "unmatched_events"
REPLAY_LOG = "replay_log"
DEAD_LETTERS = "dead_letters"
SENT_MESSAGES = "sent_messages"
QUALITY_RESULTS = "quality_results"
ALERT_LOG = "alert_log"
APP_PROGRESS = "app_progress"
DECLARED_OUTPUTS = "declared_outputs"
RETRACT_LOG = "retract_log"
# Not a contract table: the lease of the one `root_state` writer (`ackfold.ledger.commits.lease`).
LEASE = "_ledger_lease"

# Contract v1: every writer supplies exactly these.
ACK_EVENTS_DDL = """
    event_id STRING NOT NULL,
    app STRING NOT NULL,
    root_id BIGINT NOT NULL,
    kind STRING NOT NULL,
    ack_val BIGINT NOT NULL,
    stage STRING NOT NULL,
    event_time TIMESTAMP NOT NULL,
    reason STRING
"""

ROOTS_DDL = """
    root_id BIGINT NOT NULL,
    app STRING NOT NULL,
    attempt INT NOT NULL,
    origin_root_id BIGINT NOT NULL,
    source STRING NOT NULL,
    source_queue STRING,
    source_message_id STRING,
    source_position STRING,
    payload STRING,
    ingested_at TIMESTAMP NOT NULL,
    id_scheme INT
"""
# The columns of contract v1 in `roots`; `id_scheme` came later (`ackfold.ledger.schema.schemes`:
# null is the scheme of every root before it). A producer may leave it out, and a table
# may lack it for good: only `ackfold upgrade` adds it (`ackfold.ledger.setup.upgrade`).
ROOTS_V1_COLUMNS = 10
# The nullable columns ackfold added to a table after its first version, per table.
ADDED_COLUMNS = {"roots": ("id_scheme",)}

# One row per root. The columns after `fail_reason` are the reconciler's own bookkeeping:
# they make a run resumable and exact (see docs/decisions/reconcile.md).
ROOT_STATE_DDL = """
    root_id BIGINT NOT NULL,
    app STRING NOT NULL,
    status STRING NOT NULL,
    xor_acc BIGINT NOT NULL,
    event_count BIGINT NOT NULL,
    first_event_at TIMESTAMP NOT NULL,
    last_event_at TIMESTAMP NOT NULL,
    status_changed_at TIMESTAMP NOT NULL,
    attempt INT,
    origin_root_id BIGINT,
    last_stage STRING NOT NULL,
    fail_reason STRING,
    fail_stage STRING,
    fail_at TIMESTAMP,
    init_seen BOOLEAN NOT NULL,
    seen_event_hashes ARRAY<BIGINT> NOT NULL,
    reconciled_at TIMESTAMP NOT NULL,
    first_event_date DATE NOT NULL
"""
ROOT_STATE_PARTITIONS = ("first_event_date", "status")
# The columns an earlier ackfold kept in root_state and this one no longer writes
# (`ackfold.ledger.setup.layout`): a table that still has them is read as it is until the next
# reconcile brings it up to date, the first thing that run does.
FORMER_COLUMNS = {"root_state": ("last_event_id", "fail_event_id")}


def column_names(ddl: str) -> tuple[str, ...]:
    """The column names of one of the DDLs above, in order."""
    return tuple(line.split()[0] for line in ddl.strip().splitlines())


def column_specs(ddl: str) -> tuple[tuple[str, str, bool], ...]:
    """(name, SQL type, nullable) of each column of one of the DDLs above."""
    specs = []
    for line in ddl.strip().splitlines():
        name, kind, *rest = line.strip().rstrip(",").split()
        specs.append((name, kind, "NOT" not in rest))
    return tuple(specs)


def missing_columns(table: str, existing: Sequence[str]) -> list[tuple[str, str]]:
    """(name, SQL type) of the columns ackfold added to ledger table `table` since its
    first version (`ADDED_COLUMNS`, all nullable) that a stored table of columns `existing`
    lacks: optional for every writer, read as null, added only by `ackfold upgrade`
    (`ackfold.ledger.setup.upgrade`). Any other missing column is an error.

    Example:
        >>> missing_columns("roots", ROOTS_COLUMNS[:ROOTS_V1_COLUMNS])
        [('id_scheme', 'INT')]
    """
    have = set(existing)
    added = ADDED_COLUMNS.get(table, ())
    return [
        (name, kind)
        for name, kind, _ in column_specs(TABLES[table][0])
        if name in added and name not in have
    ]


def spark_schema(table: str) -> str:
    """The columns of ledger table `table` as a schema for `createDataFrame` (all nullable:
    Delta enforces the NOT NULLs on write)."""
    return ", ".join(f"{name} {kind}" for name, kind, _ in column_specs(TABLES[table][0]))


ACK_EVENTS_COLUMNS = column_names(ACK_EVENTS_DDL)
ROOTS_COLUMNS = column_names(ROOTS_DDL)

# Events whose root is not (yet) known: kept, never dropped, retried by every run.
UNMATCHED_EVENTS_DDL = ACK_EVENTS_DDL

TABLES = {
    ACK_EVENTS: (ACK_EVENTS_DDL, (), "ledger of tuple-tree events, contract v1"),
    ROOTS: (ROOTS_DDL, (), "one row per root: where it came from, how to replay it"),
    ROOT_STATE: (ROOT_STATE_DDL, ROOT_STATE_PARTITIONS, "folded state and status per root"),
    UNMATCHED_EVENTS: (UNMATCHED_EVENTS_DDL, (), "events waiting for their root"),
    REPLAY_LOG: (
        REPLAY_LOG_DDL,
        (),
        "every replay and dead-letter send: planned, then sent or failed",
    ),
    DEAD_LETTERS: (DEAD_LETTERS_DDL, (), "roots that ran out of attempts"),
    SENT_MESSAGES: (SENT_MESSAGES_DDL, (), "what producers report they sent (optional)"),
    QUALITY_RESULTS: (QUALITY_RESULTS_DDL, (), "one row per expectation per quality run"),
    ALERT_LOG: (ALERT_LOG_DDL, (), "each alert opened or resolved, per channel"),
    APP_PROGRESS: (APP_PROGRESS_DDL, (), "the progress of each streaming query: the heartbeat"),
    DECLARED_OUTPUTS: (DECLARED_OUTPUTS_DDL, (), "where the effects of each app live (optional)"),
    RETRACT_LOG: (
        RETRACT_LOG_DDL,
        (),
        "every retract of the effects of a dead letter: planned, then deleted",
    ),
}

TABLE_PROPERTIES = {
    # Reader version 1 for delta-rs: no deletion vectors, no column mapping.
    "delta.enableDeletionVectors": "false",
    "delta.autoOptimize.optimizeWrite": "true",
    # Delta's default VACUUM retention, said explicitly: maintenance's first run then has no
    # property to set (`maintenance.vacuum_retention` unchanged), and no metadata commit to
    # fail an app's concurrent append with MetadataChangedException.
    "delta.deletedFileRetentionDuration": "interval 168 hours",
}


@dataclass(frozen=True)
class Ledger:
    """Where the ledger's tables live: one directory per table under a warehouse root."""

    root: str

    def path(self, table: str) -> str:
        return f"{self.root.rstrip('/')}/{table}"


def local_dir(location: str) -> Path | None:
    """`location` as a directory of this machine (a path or a file: URL); None for an
    object store or any other URL: where delta-rs can read and write without credentials.

    Example:
        >>> local_dir("file:///srv/ware%20house"), local_dir("s3a://bucket/warehouse")
        (PosixPath('/srv/ware house'), None)
    """
    from urllib.parse import unquote, urlparse

    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    return Path(location) if parsed.scheme == "" else None


def create_sql(table: str, target: str) -> str:
    """The `CREATE TABLE IF NOT EXISTS` statement of ledger table `table`, created as
    `target` (a name, or delta.`path`): its columns, partitioning, comment, properties."""
    ddl, partitions, comment = TABLES[table]
    columns = ",\n".join(f"    {line.strip().rstrip(',')}" for line in ddl.strip().splitlines())
    partitioned = f"\nPARTITIONED BY ({', '.join(partitions)})" if partitions else ""
    props = ",\n".join(f"    '{k}' = '{v}'" for k, v in TABLE_PROPERTIES.items())
    return (
        f"CREATE TABLE IF NOT EXISTS {target} (\n{columns}\n)\nUSING delta{partitioned}\n"
        f"COMMENT '{comment}'\nTBLPROPERTIES (\n{props}\n)"
    )


def rows_by_partition(table: Any, column: str) -> dict[str, int] | None:
    """The rows of each value of partition `column` in `table` (a `DeltaTable`), from the
    row counts its log keeps per file: no data read, exact. None when it cannot be told
    so (a file without its count, or no file with one; a table that may hold deletion
    vectors; `column` not a partition): the caller then counts the rows.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import DeltaTable, write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> rows = pa.table({"status": ["pending", "completed", "pending"], "n": [1, 2, 3]})
        >>> write_deltalake(path, rows, partition_by=["status"])
        >>> rows_by_partition(DeltaTable(path), "status")
        {'completed': 1, 'pending': 2}
    """
    if column not in table.metadata().partition_columns:
        return None
    if "deletionVectors" in (table.protocol().reader_features or []):
        return None  # the log's counts include the rows a vector deletes
    actions = table.get_add_actions(flatten=True)
    try:
        values = actions.column(f"partition.{column}").to_pylist()
        counts = actions.column("num_records").to_pylist()
    except KeyError:  # no file has its stats (deltalake 1.0 then leaves the column out)
        return None
    found: dict[str, int] = {}
    for value, count in zip(values, counts, strict=True):
        if count is None:
            return None
        found[str(value)] = found.get(str(value), 0) + int(count)
    return {value: n for value, n in sorted(found.items()) if n}  # as a GROUP BY: no 0
