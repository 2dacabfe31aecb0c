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
- A store that ignores the create-if-absent precondition (S3's `If-None-Match: *`,
  GCS's `ifGenerationMatch=0`, Azure's `If-None-Match: *`) would let two creates both
  win: `require_conditional_writes` tries one (a probe object, created twice, then
  deleted) before the first commit of each process, on every object store, and refuses
  the store if the second create is not refused.

And the reading side of the protocol: the embedded engine reads a table's data files
itself, which is right only while the files alone hold the table's rows.
`ackfold.ledger.storage.vectors.require_plain_files` refuses a table with column mapping, or with
a deletion vector on any of its files (read from its log, per file: a table that merely
lists the feature reads as any other), naming the property and how to undo it, before
anything is read.

Example:
    >>> roots = table_protocols("s3a://bucket/warehouse")[1]
    >>> roots.table, roots.protocol
    ('roots', 'delta-rs: conditional create of the next log file (S3: If-None-Match: *)')
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ackfold.ledger.errors import (
    LedgerError,
    SparkCommitRefused,
    UnsafeSparkCommits,
    UnsafeStore,
)
from ackfold.ledger.schema.tables import (
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
from ackfold.ledger.storage.store import (
    endpoint_of,
    is_object_store,
    object_store_of,
    s3_client,
    split_location,
    store_kind,
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


# The log store that Delta Spark 4.4 commits with on each store (its DelegatingLogStore's
# defaults), and whether that commit is a create-if-absent, atomic beside delta-rs's:
# GCSLogStore creates the log file with ifGenerationMatch=0 (the GCS connector's create
# without overwrite); AzureLogStore renames a temporary file without overwrite, which
# ABFS makes a Copy Blob with If-None-Match: * (or a rename on a hierarchical namespace).
# S3SingleDriverLogStore PUTs unconditionally: on S3 Spark commits only the derived tables,
# one run at a time under the lease.
SPARK_LOG_STORES: Final = {
    "s3": ("S3SingleDriverLogStore", False),
    "gcs": ("GCSLogStore", True),
    "azure": ("AzureLogStore", True),
}
_LOG_STORE_PACKAGES: Final = ("io.delta.storage.", "org.apache.spark.sql.delta.storage.")


def refuse_unsafe_log_store(warehouse: str, conf: Mapping[str, str]) -> None:
    """Raise `SparkCommitRefused` if Spark settings `conf` give the warehouse's scheme a
    Delta log store other than the one whose commits meet delta-rs's atomically (GCS,
    ADLS): another (HDFSLogStore's rename, a DynamoDB log store) could let a Spark commit
    and a delta-rs commit of one version both succeed."""
    from urllib.parse import urlparse

    kind = store_kind(warehouse)
    if kind not in ("gcs", "azure"):
        return
    safe = SPARK_LOG_STORES[kind][0]
    scheme = urlparse(warehouse).scheme.lower()
    for setting in (f"spark.delta.logStore.{scheme}.impl", "spark.delta.logStore.class"):
        chosen = (conf.get(setting) or "").strip()
        if chosen and chosen not in {f"{package}{safe}" for package in _LOG_STORE_PACKAGES}:
            raise SparkCommitRefused(
                f"`{setting}` is {chosen}, but on a {kind} warehouse ({warehouse}) Delta "
                f"Spark must commit with io.delta.storage.{safe}, whose create-if-absent "
                f"meets delta-rs's atomically; another log store could lose a commit. "
                f"Remove `{setting}` from spark.conf (ACKFOLD_SPARK__CONF)"
            )


# Delta's log store for S3 whose commits are put-if-absent (a DynamoDB table decides who
# commits each version); and the file systems that several hosts share, where Delta
# Spark's commit (check that the file is absent, then rename) is no atomic create.
S3_DYNAMODB_LOG_STORE: Final = "io.delta.storage.S3DynamoDBLogStore"
SHARED_FILE_SYSTEMS: Final = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre",
     "gpfs", "beegfs", "ocfs2", "gfs2", "virtiofs", "davfs"}
)  # fmt: skip


def unsafe_spark_commits(
    warehouse: str, conf: Mapping[str, str], *, mounts: str | None = None
) -> str | None:
    """Why Spark must not commit the derived tables of the ledger under `warehouse` (with
    Spark settings `conf`), or None where each of its commits is put-if-absent: a paused
    Spark run could otherwise overwrite a newer run's commit of the same version, which no
    fence can undo. `mounts`: the text of /proc/self/mounts (this host's, by default).

    Example:
        >>> unsafe_spark_commits("gs://lake/warehouse", {}) is None
        True
        >>> unsafe_spark_commits(
        ...     "s3a://lake/warehouse",
        ...     {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"},
        ... ) is None
        True
        >>> print(unsafe_spark_commits("s3a://lake/warehouse", {}).split(": ")[0])
        S3 (s3a://lake/warehouse) with Delta's S3SingleDriverLogStore
    """
    from urllib.parse import urlparse

    kind = store_kind(warehouse)
    if kind == "s3":
        scheme = urlparse(warehouse).scheme.lower()
        for setting in (f"spark.delta.logStore.{scheme}.impl", "spark.delta.logStore.class"):
            if (conf.get(setting) or "").strip() == S3_DYNAMODB_LOG_STORE:
                return None
        return (
            f"S3 ({warehouse}) with Delta's S3SingleDriverLogStore: its commit is an "
            "unconditional PUT of the next log file"
        )
    if kind == "local":
        fs_type, mount = _file_system(urlparse(warehouse).path or warehouse, mounts)
        if fs_type in SHARED_FILE_SYSTEMS or fs_type.startswith("fuse."):
            return (
                f"a shared file system ({fs_type} at {mount}, holding {warehouse}): Delta "
                "Spark's commit there checks that the next log file is absent, then renames "
                "onto it, which is no atomic create across hosts"
            )
    return None  # one host's local disk, GCS and ADLS (create-if-absent), HDFS (rename)


def refuse_unsafe_spark_engine(settings: Any, *, mounts: str | None = None) -> None:
    """Raise `UnsafeSparkCommits` if the Spark engine would commit the ledger's derived
    tables (`settings.table_root`) where a paused writer can overwrite a newer commit
    (`unsafe_spark_commits`), naming the store and the ways out."""
    why = unsafe_spark_commits(settings.table_root, settings.spark.conf, mounts=mounts)
    if why is None:
        return
    dynamodb = (
        f", or Delta's DynamoDB log store for S3 (spark.conf "
        f"`spark.delta.logStore.s3a.impl` = {S3_DYNAMODB_LOG_STORE}, with its DynamoDB table)"
        if store_kind(settings.table_root) == "s3"
        else ""
    )
    raise UnsafeSparkCommits(
        f"refusing the Spark engine (`engine.kind`): its commits to the derived tables would "
        f"go to {why}, so a Spark run paused past its lease could overwrite a newer run's "
        f"commit. Use the embedded engine (`engine.kind: embedded`, or `auto`), whose "
        f"delta-rs commits are put-if-absent{dynamodb}"
    )


def _file_system(path: str, mounts: str | None) -> tuple[str, str]:
    """The type and mount point of the file system that holds `path` (the longest mount
    point above it in `mounts`); ("", "") if unknown."""
    import os

    if mounts is None:
        try:
            with open("/proc/self/mounts", encoding="utf-8") as found:
                mounts = found.read()
        except OSError:
            return "", ""
    path = os.path.abspath(path)
    best = ("", "")
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        above = path == point or path.startswith(point.rstrip("/") + "/")
        if above and len(point) >= len(best[1]):
            best = (fields[2], point)
    return best


_CHECKED: set[tuple[str, str, str]] = set()
# What each store's create-if-absent is called, and the stores known to honour it.
CREATE_IF_ABSENT: Final = {
    "s3": "If-None-Match: *",
    "gcs": "ifGenerationMatch=0 (x-goog-if-generation-match: 0)",
    "azure": "If-None-Match: *",
}
_SAFE_STORES: Final = {
    "s3": "AWS S3, MinIO releases of 2024 and later, Cloudflare R2, Ceph RGW with conditional "
    "PUT, or ackfold's local S3 API",
    "gcs": "Google Cloud Storage, or ackfold's local GCS API (`ackfold gcs`)",
    "azure": "Azure Blob Storage or ADLS Gen2, or ackfold's local Azure API (`ackfold azure`)",
}


def require_conditional_writes(
    location: str, options: Mapping[str, str] | None, *, client: Callable[[], Any] | None = None
) -> None:
    """Once per process and store: on an object store (S3 or S3-compatible, GCS, ADLS),
    check that a second create of one object under `location` with the store's
    create-if-absent precondition is refused; else `UnsafeStore`, naming the variable
    that points at that store. `client()` gives the probe's client (a run's `Store`'s)."""
    kind = store_kind(location)
    if kind not in CREATE_IF_ABSENT:
        return
    options = dict(options or {})
    variable, endpoint = endpoint_of(location, options)
    container, prefix = split_location(location)
    if (kind, endpoint, container) in _CHECKED:
        return
    if kind == "s3":
        made = client() if client is not None else None
        status = probe_conditional_create(container.removeprefix("s3://"), prefix, options, made)
        refused, answer = status == 412, f"it answered {status}, not 412"
    else:
        refused, answer = probe_object_store(location, options, client() if client else None)
    if not refused:
        raise UnsafeStore(
            f"the {kind.upper() if kind != 'azure' else 'Azure'} store at {endpoint} "
            f"({variable}) did not refuse a second create of one object with "
            f"{CREATE_IF_ABSENT[kind]} ({answer}): two ledger commits of one version "
            f"could both succeed there, and one would be lost. Use a store that honours it "
            f"({_SAFE_STORES[kind]}), or keep the `warehouse` on a local file system"
        )
    _CHECKED.add((kind, endpoint, container))


def probe_object_store(
    location: str, options: Mapping[str, str], store: Any = None
) -> tuple[bool, str]:
    """Create one probe object twice under `location` with object_store's create-if-absent
    (delta-rs's commit), then delete it: (whether the second create was refused, what
    the store answered). GCS and ADLS; `store`: the container's object store, if made."""
    import obstore
    from obstore.exceptions import AlreadyExistsError, BaseError, PreconditionError

    store = store if store is not None else object_store_of(location, options)
    _, prefix = split_location(location)
    key = f"{prefix}/_ackfold_probe/{uuid.uuid4().hex}".lstrip("/")
    try:
        obstore.put(store, key, b"1", mode="create")
    except BaseError as exc:
        raise UnsafeStore(
            f"cannot write a probe object to {location}/_ackfold_probe: {_first(exc)} (check "
            "the store's credentials and endpoint variables)"
        ) from None
    except OSError as exc:  # unreachable, for now: a later try may get through
        raise LedgerError(f"cannot reach the store of {location}: {_first(exc)}") from None
    try:
        obstore.put(store, key, b"2", mode="create")
        return False, "it stored the second one"
    except (AlreadyExistsError, PreconditionError):
        return True, "refused"
    finally:
        with contextlib.suppress(Exception):  # a probe left behind is 1 byte
            obstore.delete(store, key)


def _first(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def probe_conditional_create(
    bucket: str, prefix: str, options: Mapping[str, str], client: Any = None
) -> int:
    """Create one probe object twice with `If-None-Match: *` under `prefix`, delete it;
    the HTTP status of the second create (412 where the store is safe). `client`: the
    store's S3 client, if made."""
    from botocore.exceptions import BotoCoreError

    client = client if client is not None else s3_client(options)
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
