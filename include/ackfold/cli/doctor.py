"""`ackfold doctor`: which protocol commits each ledger table on the configured store, and
whether the setup is safe (invariant 14). No JVM.

It says where the warehouse is and how delta-rs reaches it (the storage options from the
environment, secrets masked), tries a conditional create on an object store (S3, GCS,
ADLS: the check every process makes before its first commit), names the Hadoop connector
and the Delta log store Spark uses there, and lists per table who commits it and how. Exit 0 when
the setup is safe, 1 when it is not, with the reason and the setting to change. It also
warns, without failing, of every endpoint on loopback (SQS, Kafka, the store, Spark
Connect): the local stack's, which a deployment must not keep (`loopback_endpoints`).
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
    from ackfold.ledger.storage.protocol import (
        CREATE_IF_ABSENT,
        SPARK_LOG_STORES,
        require_conditional_writes,
        table_protocols,
    )
    from ackfold.ledger.storage.store import (
        delta_uri,
        endpoint_of,
        masked,
        storage_options,
        store_kind,
    )
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
    store_endpoint = endpoint_of(warehouse, options) if kind in ("s3", "gcs", "azure") else None
    warnings = loopback_endpoints(settings, store_endpoint)
    emit("")
    rows = table_protocols(warehouse)
    width = max(len(r.table) for r in rows)
    for row in rows:
        emit(f"{row.table:<{width}}  {row.protocol}")
        emit(f"{'':<{width}}    written by: {row.writers}")
    emit("")
    for note in notes:
        emit(f"note: {note}")
    for warning in warnings:
        emit(f"warning: {warning}")
    if problems:
        for problem in problems:
            emit(f"UNSAFE: {problem}")
        return 1
    emit("safe: one commit protocol per table, every writer at once")
    return 0


def loopback_endpoints(
    settings: Settings, store_endpoint: tuple[str, str] | None = None
) -> list[str]:
    """A warning for each endpoint of `settings` on this machine (127.0.0.0/8, ::1,
    localhost), naming its setting: right for the local stack, wrong for a deployment,
    whose other hosts (and whose replays) would each reach their own loopback.

    `store_endpoint` is the warehouse's (the variable that names it, the endpoint). Kafka's
    brokers count when an app reads Kafka or the setting is given: its default is loopback.

    Example:
        >>> from ackfold.config import load_settings
        >>> local = load_settings(sqs={"endpoint_url": "http://localhost:9324"})
        >>> print(loopback_endpoints(local)[0].partition(",")[0])
        sqs.endpoint_url (ACKFOLD_SQS__ENDPOINT_URL) is http://localhost:9324
        >>> loopback_endpoints(load_settings())
        []
    """
    from urllib.parse import urlsplit

    from ackfold.config.connections import mask_token
    from ackfold.config.hosts import is_loopback_host

    def local(url: str) -> bool:
        host = urlsplit(url if "://" in url else f"//{url}").hostname
        return host is not None and is_loopback_host(host)

    found: list[tuple[str, str, str]] = []
    sqs = settings.sqs.endpoint_url
    if sqs and local(sqs):
        fix = "unset it (ACKFOLD_SQS__ENDPOINT_URL=) for AWS, or name the real endpoint"
        found.append(("sqs.endpoint_url (ACKFOLD_SQS__ENDPOINT_URL)", sqs, fix))
    kafka = settings.kafka.bootstrap_servers
    reads_kafka = any(app.source == "kafka" for app in settings.apps.values())
    if (reads_kafka or "bootstrap_servers" in settings.kafka.model_fields_set) and any(
        local(server.strip()) for server in kafka.split(",")
    ):
        found.append(("kafka.bootstrap_servers (ACKFOLD_KAFKA__BOOTSTRAP_SERVERS)", kafka,
                      "name the cluster's brokers"))  # fmt: skip
    if store_endpoint is not None and local(store_endpoint[1]):
        variable, url = store_endpoint
        fix = f"unset {variable} for the cloud's own, or name the real endpoint"
        found.append((f"the warehouse's endpoint ({variable})", url, fix))
    remote = settings.spark.remote
    if remote and local(remote.replace("sc://", "http://", 1)):
        found.append(("spark.remote (ACKFOLD_SPARK__REMOTE)", mask_token(remote),
                      "name the Spark Connect server the deployment's hosts reach"))  # fmt: skip
    return [
        f"{setting} is {value}, on this machine: fine for the local stack; in a deployment, {fix}"
        for setting, value, fix in found
    ]


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
