"""`ackfold doctor`: which protocol commits each ledger table on the configured store, and
whether the setup is safe (invariant 14). No JVM.

It says where the warehouse is and how delta-rs reaches it (the storage options from the
environment, secrets masked), tries a conditional create on S3 (the check every process
makes before its first commit), and lists per table who commits it and how. Exit 0 when
the setup is safe, 1 when it is not, with the reason and the setting to change.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ackfold.cli.common import AddCommand, UsageError, emit

if TYPE_CHECKING:
    from ackfold.config import Settings


def add_commands(command: AddCommand) -> None:
    """Register `ackfold doctor`."""
    doctor = command(
        "doctor",
        _doctor,
        "say which protocol commits each ledger table on the configured store, and whether "
        "the setup is safe with every writer at once",
    )
    doctor.add_argument(
        "--warehouse", metavar="URI", help="check this warehouse (default: the `warehouse` setting)"
    )
    doctor.add_argument(
        "--no-probe",
        action="store_true",
        help="do not write the probe object that checks S3 conditional writes",
    )


def _doctor(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.errors import UnsafeStore
    from ackfold.ledger.protocol import require_conditional_writes, table_protocols
    from ackfold.ledger.store import delta_uri, masked, storage_options, store_kind

    warehouse = settings.table_root if args.warehouse is None else args.warehouse.strip()
    if not warehouse:
        raise UsageError("--warehouse must name a directory or a URI, got an empty string")
    kind = store_kind(warehouse)
    options = storage_options(warehouse)
    problems: list[str] = []
    notes: list[str] = []
    emit(f"warehouse: {warehouse} (store: {kind}; delta-rs: {delta_uri(warehouse)})")
    if options is not None:
        shown = ", ".join(f"{k}={v}" for k, v in masked(options).items()) or "none"
        emit(f"storage options (from the environment): {shown}")
    try:
        import deltalake

        emit(f"deltalake: {deltalake.__version__}")
    except ImportError:
        problems.append("this Python cannot import deltalake: install deltalake==1.6.6")
    if kind == "s3":
        if args.no_probe:
            notes.append("conditional writes not probed (--no-probe)")
        elif not problems:
            try:
                require_conditional_writes(warehouse, options)
                emit("conditional writes: a second create with If-None-Match: * was refused (412)")
            except UnsafeStore as exc:
                problems.append(str(exc))
        for name in ("AWS_S3_LOCKING_PROVIDER", "AWS_S3_ALLOW_UNSAFE_RENAME"):
            if os.environ.get(name):
                notes.append(
                    f"{name} is set and ignored: deltalake 1.x commits with conditional writes "
                    "only (delta-io/delta-rs discussion 4482)"
                )
        notes.append(
            "Spark reads s3a:// through hadoop-aws (not in `ackfold setup`): tracked apps and "
            "the Spark reconcile need it on their classpath; they never commit the "
            "append-only tables there"
        )
    elif kind in ("gcs", "azure"):
        notes.append(f"{kind}: delta-rs's own precondition, not probed by ackfold")
    elif kind == "other":
        problems.append(
            f"{warehouse}: ackfold supports a local file system, S3 (and S3-compatible), GCS "
            "and ADLS for the ledger; this store's commit protocol is not checked: set "
            "`warehouse` (ACKFOLD_WAREHOUSE) to one of those"
        )
    emit("")
    rows = table_protocols(warehouse)
    width = max(len(r.table) for r in rows)
    for row in rows:
        emit(f"{row.table:<{width}}  {row.protocol}")
        emit(f"{'':<{width}}    written by: {row.writers}")
    emit("")
    for note in notes:
        emit(f"note: {note}")
    if problems:
        for problem in problems:
            emit(f"UNSAFE: {problem}")
        return 1
    emit("safe: one commit protocol per table, every writer at once")
    return 0
