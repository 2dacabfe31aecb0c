"""`ackfold doctor`: which protocol commits each ledger table on the configured store, and
whether the setup is safe (invariant 14). No JVM.

It says where the warehouse is and how delta-rs reaches it (the storage options from the
environment, secrets masked), tries a conditional create on an object store (S3, GCS,
ADLS: the check every process makes before its first commit), names the Hadoop connector
and the Delta log store Spark uses there, and lists per table who commits it and how. Exit 0 when
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
        help="do not write the probe object that checks the store's conditional writes",
    )


def _doctor(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.errors import UnsafeStore
    from ackfold.ledger.protocol import (
        CREATE_IF_ABSENT,
        SPARK_LOG_STORES,
        require_conditional_writes,
        table_protocols,
    )
    from ackfold.ledger.store import delta_uri, endpoint_of, masked, storage_options, store_kind
    from ackfold.spark.jars import STORE_BUNDLES

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
    mixed = mixed_pyspark()
    if mixed:
        problems.append(mixed)
    if kind in ("s3", "gcs", "azure"):
        variable, endpoint = endpoint_of(warehouse, options)
        emit(f"endpoint: {endpoint} ({variable})")
        if args.no_probe:
            notes.append("conditional writes not probed (--no-probe)")
        elif not problems:
            try:
                require_conditional_writes(warehouse, options)
                emit(
                    f"conditional writes: a second create with {CREATE_IF_ABSENT[kind]} was refused"
                )
            except UnsafeStore as exc:
                problems.append(str(exc))
        if kind == "s3":
            for name in ("AWS_S3_LOCKING_PROVIDER", "AWS_S3_ALLOW_UNSAFE_RENAME"):
                if os.environ.get(name):
                    notes.append(
                        f"{name} is set and ignored: deltalake 1.x commits with conditional "
                        "writes only (delta-io/delta-rs discussion 4482)"
                    )
        log_store, conditional = SPARK_LOG_STORES[kind]
        bundle = STORE_BUNDLES[kind]
        notes.append(
            f"Spark reaches this store through {', '.join(bundle.artifacts)} (resolved for "
            f"this warehouse only: `ackfold setup`, or when a session starts) and commits "
            f"there with Delta's {log_store}: "
            + (
                "a create-if-absent too, atomic beside delta-rs's"
                if conditional
                else "an unconditional PUT, so Spark commits only the derived tables, one run at "
                "a time under the lease"
            )
        )
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


def mixed_pyspark() -> str | None:
    """What is wrong when pyspark and pyspark-client (which Airflow's Spark provider pulls)
    are both installed at different versions: they share the `pyspark` folder, which then
    holds files of both."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        full, client = version("pyspark"), version("pyspark-client")
    except PackageNotFoundError:
        return None
    if full == client:
        return None
    return (
        f"pyspark {full} and pyspark-client {client} share the pyspark folder, which now "
        f"mixes both: install one version of each (pip install pyspark=={full} "
        f"pyspark-client=={full}), or the `airflow-spark` extra with Airflow's constraints"
    )
