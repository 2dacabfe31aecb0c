"""Which commit protocol commits each ledger table on the configured store, and the
checks that refuse, at start, a setup that could lose a commit (invariant 14).

On a local file system every writer (delta-rs, Spark) commits by creating the next log
file only if it is absent, which the file system makes atomic. On an object store:

- **every append-only table and the lease**: delta-rs only, with the store's atomic
  create (S3: `PutObject` with `If-None-Match: *`, 412 to the loser, who retries).
  `driver_writer` gives every process its delta-rs writer there; a Spark append to one
  of these tables is refused (`refuse_spark_commit`), because Spark's commit on `s3a://`
  is an unconditional PUT that can overwrite another writer's commit without an error.
- **the derived tables** (`root_state`, `unmatched_events`, `dead_letters`): written only
  by the run that holds the ledger's lease (reconcile, replay), one at a time, so Spark's
  commits there meet no other writer.
- An S3-compatible store that ignores `If-None-Match` would let two creates both win:
  `require_conditional_writes` tries one (a probe object, created twice, then deleted)
  before the first commit of each process, and refuses the store if the second create
  is not refused.

And the reading side of the protocol: the embedded engine reads a table's data files
itself, which is right only while the files alone hold the table's rows.
`require_plain_files` refuses a table with deletion vectors or column mapping, naming the
property and how to undo it, before anything is read.

Example:
    >>> roots = table_protocols("s3a://bucket/warehouse")[1]
    >>> roots.table, roots.protocol
    ('roots', 'delta-rs: conditional create of the next log file (S3: If-None-Match: *)')
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ackfold.ledger.errors import LedgerError, SparkCommitRefused, UnreadableFiles, UnsafeStore
from ackfold.ledger.store import S3_ENDPOINTS, delta_uri, is_object_store, s3_client, store_kind
from ackfold.ledger.tables import (
    ACK_EVENTS,
    ALERT_LOG,
    DEAD_LETTERS,
    LEASE,
    QUALITY_RESULTS,
    REPLAY_LOG,
    ROOT_STATE,
    ROOTS,
    SENT_MESSAGES,
    TABLES,
    UNMATCHED_EVENTS,
)

APPEND_ONLY: Final = (ACK_EVENTS, ROOTS, REPLAY_LOG, SENT_MESSAGES, ALERT_LOG, QUALITY_RESULTS)
DERIVED: Final = (ROOT_STATE, UNMATCHED_EVENTS, DEAD_LETTERS)
# How delta-rs's object store creates a log file only if absent, per store.
_PRECONDITION: Final = {
    "s3": "S3: If-None-Match: *",
    "gcs": "GCS: ifGenerationMatch=0",
    "azure": "ADLS: If-None-Match: *",
}
_ATOMIC = "delta-rs or Spark: atomic create of the next log file"


def _conditional(kind: str) -> str:
    return f"delta-rs: conditional create of the next log file ({_PRECONDITION[kind]})"


@dataclass(frozen=True)
class TableProtocol:
    """How one table is committed on the configured store, and by whom."""

    table: str
    writers: str
    protocol: str


def table_protocols(warehouse: str) -> list[TableProtocol]:
    """Per ledger table (and the lease): who commits it on `warehouse`'s store, and how."""
    kind = store_kind(warehouse)
    rows = []
    for name in (*TABLES, LEASE):
        if name == LEASE:
            writers = "reconcile, replay, maintenance runs (compare-and-swap, no retry)"
            protocol = _conditional(kind) if kind in _PRECONDITION else _ATOMIC
            protocol = protocol.replace("delta-rs or Spark", "delta-rs")
            rows.append(TableProtocol(name, writers, protocol))
            continue
        if name in APPEND_ONLY:
            writers = {
                ACK_EVENTS: "tracked apps (driver or Connect worker), producers (LedgerWriter)",
                ROOTS: "spouts and ingesters, producers (LedgerWriter)",
                REPLAY_LOG: "replay runs (under the lease)",
                SENT_MESSAGES: "producers that record what they sent",
                ALERT_LOG: "alert runs",
                QUALITY_RESULTS: "quality runs",
            }[name] + "; maintenance (retention, compaction, VACUUM: under the lease)"
        else:
            writers = "the run holding the ledger's lease (reconcile, replay); maintenance VACUUM"
        if kind in ("s3", "gcs", "azure"):
            protocol = (
                _conditional(kind)
                if name in APPEND_ONLY
                else "Spark or delta-rs, one writer at a time under the lease; "
                "created and vacuumed by delta-rs"
            )
        elif kind == "local":
            protocol = _ATOMIC
        else:
            protocol = "Spark (Hadoop's file system for this scheme); not checked by ackfold"
        rows.append(TableProtocol(name, writers, protocol))
    return rows


def refuse_spark_commit(location: str, table: str, setting: str = "warehouse") -> None:
    """Raise `SparkCommitRefused` if a Spark commit to ledger table `table` under
    `location` could race delta-rs's commits there (any object store)."""
    if is_object_store(location):
        raise SparkCommitRefused(
            f"refusing a Spark commit to {table} under {location}: on an object store every "
            f"ledger table is committed by delta-rs with conditional writes, and Spark's commit "
            f"there is an unconditional PUT that can overwrite another writer's commit without "
            f"an error. Write these rows with ackfold.LedgerWriter (or a tracked app's "
            f"StageTracker, which does), or set `{setting}` to a local directory"
        )


_CHECKED: set[tuple[str, str]] = set()


def require_conditional_writes(location: str, options: Mapping[str, str] | None) -> None:
    """Once per process and store: on S3 (or an S3-compatible endpoint), check that a
    second create of one object with `If-None-Match: *` is refused; else `UnsafeStore`."""
    if store_kind(location) != "s3":
        return
    options = dict(options or {})
    variable = next((k for k in S3_ENDPOINTS if options.get(k)), S3_ENDPOINTS[0])
    endpoint = options.get(variable) or "AWS S3"
    bucket, _, prefix = delta_uri(location).removeprefix("s3://").partition("/")
    if (endpoint, bucket) in _CHECKED:
        return
    second = probe_conditional_create(bucket, prefix, options)
    if second != 412:
        raise UnsafeStore(
            f"the S3 store at {endpoint} ({variable}) did not refuse a second create of "
            f"one object with If-None-Match: * (it answered {second}, not 412): two ledger "
            f"commits of one version could both succeed there, and one would be lost. Use a "
            f"store that supports S3 conditional writes (AWS S3, MinIO releases of 2024 and later, "
            f"Cloudflare R2, Ceph RGW with conditional PUT), or keep the `warehouse` on a "
            f"local file system"
        )
    _CHECKED.add((endpoint, bucket))


def probe_conditional_create(bucket: str, prefix: str, options: Mapping[str, str]) -> int:
    """Create one probe object twice with `If-None-Match: *` under `prefix`, delete it;
    the HTTP status of the second create (412 where the store is safe)."""
    from botocore.exceptions import BotoCoreError

    client = s3_client(options)
    try:
        return _create_twice(client, bucket, prefix)
    except BotoCoreError as exc:  # unreachable, for now: a later try may get through
        raise LedgerError(f"cannot reach the S3 store of s3://{bucket}/{prefix}: {exc}") from None


def _create_twice(client: Any, bucket: str, prefix: str) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    key = f"{prefix.strip('/')}/_ackfold_probe/{uuid.uuid4().hex}".lstrip("/")
    try:
        client.put_object(Bucket=bucket, Key=key, Body=b"1", IfNoneMatch="*")
        try:
            client.put_object(Bucket=bucket, Key=key, Body=b"2", IfNoneMatch="*")
        except ClientError as exc:
            return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        return 200
    except ClientError as exc:
        raise UnsafeStore(
            f"cannot write a probe object to s3://{bucket}/{key}: {exc} (check the "
            "credentials, and AWS_ENDPOINT for an S3-compatible store)"
        ) from None
    finally:
        # A probe left behind is 1 byte: never hide the answer behind it.
        with contextlib.suppress(ClientError, BotoCoreError):
            client.delete_object(Bucket=bucket, Key=key)


def require_plain_files(table: Any, path: str, actions: Any = None) -> None:
    """Raise `UnreadableFiles` unless the data files of `table` (a delta-rs `DeltaTable`
    at `path`) hold exactly its rows, under its column names: no column mapping, and no
    deletion vector on any file. `actions`: its add actions (an Arrow table), if read."""
    mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    if mode != "none":
        raise UnreadableFiles(
            f"{path} has column mapping (delta.columnMapping.mode = {mode}): its data files "
            "name the columns otherwise, and ackfold's engines read the files themselves. "
            "Rewrite it without (CREATE TABLE ... AS SELECT into a table made by "
            "`ackfold init`, then swap the directories), and keep the table property "
            "delta.columnMapping.mode unset on ledger tables"
        )
    features = table.protocol().reader_features or []
    if "deletionVectors" in features and _has_deletion_vectors(table, actions):
        raise UnreadableFiles(
            f"{path} has deletion vectors (delta.enableDeletionVectors): rows deleted or "
            "replaced beside its data files, which ackfold's engines read themselves. Purge "
            "them and turn them off in Spark: ALTER TABLE delta.`<path>` SET TBLPROPERTIES "
            "('delta.enableDeletionVectors' = 'false'), then REORG TABLE delta.`<path>` "
            "APPLY (PURGE)"
        )


def _has_deletion_vectors(table: Any, actions: Any) -> bool:
    """Whether any file of `table` has a deletion vector (its add action names one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if actions is None:
        actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    named = [
        c for c in actions.column_names if c.lower().replace("_", "").startswith("deletionvector")
    ]
    if not named:  # delta-rs does not say: the feature is on, so assume they may exist
        return True
    return any(pc.any(pc.is_valid(actions[c])).as_py() for c in named)
