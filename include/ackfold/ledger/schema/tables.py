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

# The replay log, append-only like `ack_events`: for each message a replay run sends (or
# would send, in a dry run), a `planned` row BEFORE it is sent, then a `sent` row (with
# `sent_at` and the new `message_id`) or a `failed` row (with the `error`). A send planned
# but never sent is what a crash or an unreachable queue left behind: the next run sends
# exactly those. (root_id, action) identifies one send across runs; dry runs never count.
REPLAY_LOG_DDL = """
    replay_id STRING NOT NULL,
    event STRING NOT NULL,
    requested_by STRING NOT NULL,
    request STRING NOT NULL,
    root_id BIGINT NOT NULL,
    app STRING NOT NULL,
    action STRING NOT NULL,
    prior_status STRING NOT NULL,
    attempt INT NOT NULL,
    origin_root_id BIGINT NOT NULL,
    new_root_id BIGINT,
    source STRING NOT NULL,
    target STRING NOT NULL,
    reason STRING,
    last_stage STRING,
    first_event_date DATE NOT NULL,
    dry_run BOOLEAN NOT NULL,
    planned_at TIMESTAMP NOT NULL,
    sent_at TIMESTAMP,
    message_id STRING,
    error STRING
"""

# Roots that ran out of attempts, with why and how far they got. `redriven_at` is set when
# a replay brings one back (as an SQS redrive would).
DEAD_LETTERS_DDL = """
    root_id BIGINT NOT NULL,
    app STRING NOT NULL,
    origin_root_id BIGINT NOT NULL,
    attempt INT NOT NULL,
    source STRING NOT NULL,
    source_queue STRING,
    dead_letter_queue STRING NOT NULL,
    reason STRING NOT NULL,
    last_stage STRING,
    message_id STRING,
    dead_lettered_at TIMESTAMP NOT NULL,
    redriven_at TIMESTAMP,
    redrive_root_id BIGINT
"""

# What a producer sent to a source queue, for producers that can say so (the demo's feed
# does): the quality checks expect every sent message to be registered as a root. Optional;
# `source_message_id` is what the app's spout registers (SQS: the MessageId).
SENT_MESSAGES_DDL = """
    app STRING NOT NULL,
    source STRING NOT NULL,
    source_queue STRING NOT NULL,
    source_message_id STRING NOT NULL,
    sent_at TIMESTAMP NOT NULL
"""

# One row per expectation per quality run (`ackfold quality`, `ackfold_quality`), for
# trends. `run_at` is when it ran, `window_start` where its window began; `scope` is
# `all apps` or `app <name>` (`--app`); `app` is null for the ledger soundness checks.
QUALITY_RESULTS_DDL = """
    run_id STRING NOT NULL,
    run_at TIMESTAMP NOT NULL,
    window_start TIMESTAMP NOT NULL,
    scope STRING NOT NULL,
    suite STRING NOT NULL,
    app STRING,
    check_name STRING NOT NULL,
    expectation STRING NOT NULL,
    description STRING NOT NULL,
    success BOOLEAN NOT NULL,
    observed STRING NOT NULL,
    element_count BIGINT,
    unexpected_count BIGINT,
    unexpected_sample STRING,
    threshold STRING
"""

# The alerts' open/resolved log (`ackfold.alerts`), append only: one row each time a breach
# of `rule` for `app` opens or resolves on `channel` and the message went out. A key's
# latest row says whether its breach is open: nothing is re-sent while it lasts.
ALERT_LOG_DDL = """
    app STRING NOT NULL,
    rule STRING NOT NULL,
    channel STRING NOT NULL,
    event STRING NOT NULL,
    value STRING NOT NULL,
    threshold STRING NOT NULL,
    root_ids ARRAY<BIGINT> NOT NULL,
    opened_at TIMESTAMP NOT NULL,
    event_at TIMESTAMP NOT NULL,
    airflow_run_id STRING
"""

# The apps' heartbeat (`ackfold.track.heartbeat`), append only: each streaming query's latest
# progress, at most one row per query per `heartbeat.interval`, written by the tracked
# session's listener with delta-rs. `event`: progress, idle (a heartbeat without a batch),
# started or terminated (`exception` says why, if it failed). `source_lag`: the largest
# offsets-behind-latest any source reports (Kafka), null where none does.
APP_PROGRESS_DDL = """
    app STRING NOT NULL,
    query_id STRING NOT NULL,
    run_id STRING NOT NULL,
    query_name STRING,
    event STRING NOT NULL,
    batch_id BIGINT,
    batch_at TIMESTAMP,
    input_rows BIGINT,
    input_rows_per_second DOUBLE,
    processed_rows_per_second DOUBLE,
    source_lag BIGINT,
    exception STRING,
    recorded_at TIMESTAMP NOT NULL
"""

# Where each app's effects live (`ackfold.ledger.commits.outputs`), append only, optional: a ledger
# without it has no declared outputs. One row per declaration of output table `output` (its
# location as the app writes it) by `app`; the newest row per (app, output) holds.
# `origin_column` holds the origin root id of each of its rows; `clean`: no dead letter may
# have rows there (a quality expectation). `declared_by`: `write_batch` (declared by default
# on an app's first write to it), or who called `declare_output` (`ackfold outputs`).
DECLARED_OUTPUTS_DDL = """
    app STRING NOT NULL,
    output STRING NOT NULL,
    origin_column STRING NOT NULL,
    clean BOOLEAN NOT NULL,
    declared_by STRING NOT NULL,
    declared_at TIMESTAMP NOT NULL
"""

# The retract audit log (`ackfold.effects.retract`), append only, written ahead: a
# `planned` row per dead letter and output BEFORE the delete (`row_count`: its rows found there,
# `sample`: a few of them as JSON), then, after each table's one delete commit, a `deleted`
# row per dead letter of it (`table_version`: the commit; `table_rows`: what the commit
# deleted in all), or a `failed` row (with the `error`). A `planned` row with no `deleted`
# or `failed` row of its retract is what a crash left: the delete may or may not have landed.
RETRACT_LOG_DDL = """
    retract_id STRING NOT NULL,
    event STRING NOT NULL,
    requested_by STRING NOT NULL,
    request STRING NOT NULL,
    root_id BIGINT NOT NULL,
    app STRING NOT NULL,
    origin_root_id BIGINT NOT NULL,
    attempt INT,
    output STRING NOT NULL,
    origin_column STRING NOT NULL,
    row_count BIGINT NOT NULL,
    sample STRING,
    table_version BIGINT,
    table_rows BIGINT,
    logged_at TIMESTAMP NOT NULL,
    error STRING
"""

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
