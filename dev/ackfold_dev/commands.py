"""The development commands of `ackfold`: `up` (the embedded stack), `demo` (the word
count with seeded faults, and its delivery report), and the local servers `sqs`, `s3`,
`gcs`, `azure`, `kafka`, `cluster` and `connect`, each run until Ctrl-C.

They join the CLI through the entry-point group `ackfold.commands` (`add_commands`), in a
checkout where `make install` installed this wing; a production install lists their
names only, as development commands (`ackfold.cli.main.DEVELOPMENT_COMMANDS`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from ackfold.cli.common import AddCommand, UsageError, emit, spark_session
from ackfold.sources.base import SourceError

if TYPE_CHECKING:
    from ackfold.config import Settings


def add_commands(command: AddCommand) -> None:
    """Register `ackfold up`, `demo`, `sqs`, `s3`, `gcs`, `azure`, `kafka`, `cluster` and
    `connect`, with their arguments."""
    up = command("up", _up, "run the embedded stack (airflow standalone) until Ctrl-C")
    up.add_argument(
        "--no-demo", action="store_true", help="do not start the word-count demo with it"
    )
    _add_demo(command)
    command("sqs", _sqs, "run the local ElasticMQ (SQS) server with the demo queues until Ctrl-C")
    s3 = command(
        "s3",
        _s3,
        "run the local S3 API (moto, atomic conditional writes) with a bucket until Ctrl-C",
    )
    s3.add_argument("--port", default="9020", help="its port on 127.0.0.1 (default 9020)")
    s3.add_argument("--bucket", default="ackfold", help="the bucket to create (default ackfold)")
    for name, what, port, default in (
        ("gcs", "GCS API (fake-gcs-server)", "9030", "bucket"),
        ("azure", "Azure Blob API (Azurite)", "9040", "container"),
    ):
        store = command(name, _store, f"run the local {what} with a {default} until Ctrl-C")
        store.add_argument("--port", default=port, help=f"its port on 127.0.0.1 (default {port})")
        store.add_argument(
            "--container", default="ackfold", help=f"the {default} to create (default ackfold)"
        )
    command("kafka", _kafka, "run the local Kafka broker (KRaft) with the demo topics until Ctrl-C")
    cluster = command(
        "cluster",
        _cluster,
        "run a Spark standalone cluster (a master and workers) on this machine until Ctrl-C",
    )
    cluster.add_argument("--workers", default="2", metavar="N", help="workers (default 2)")
    cluster.add_argument("--cores", default="1", metavar="N", help="cores per worker (default 1)")
    cluster.add_argument(
        "--memory", default="2g", metavar="SIZE", help="memory per worker (default 2g)"
    )
    cluster.add_argument("--port", default="7077", help="the master's port (default 7077)")
    cluster.add_argument(
        "--webui-port", default="8090", help="the master's web UI port (default 8090)"
    )
    connect = command(
        "connect",
        _connect,
        "run a Spark Connect server with Delta on this machine until Ctrl-C",
    )
    connect.add_argument("--port", default="15002", help="its port (default 15002)")


def _add_demo(command: AddCommand) -> None:
    from ackfold.demo.flags import add_demo_flags

    demo = command(
        "demo",
        _demo,
        "run the word-count demo on SQS with seeded faults, then print its delivery report",
    )
    add_demo_flags(demo)
    demo.add_argument(
        "--keep-running", action="store_true", help="after the report, keep the app running"
    )
    demo.add_argument(
        "--airflow",
        action="store_true",
        help="with --keep-running: leave reconcile and replay to the Airflow DAGs, and the "
        "app to its own DAG if apps.wordcount.dag gives it one (make run)",
    )
    demo.add_argument("--json", action="store_true", help="also print the report as JSON")


def _demo(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.demo.flags import demo_options

    if args.airflow and not args.keep_running:
        raise UsageError("--airflow goes with --keep-running: it hands the running app's "
                         "reconcile and replay to the Airflow DAGs")  # fmt: skip
    try:
        messages, faults = demo_options(settings.demo.faults, args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    import threading

    from ackfold.demo.run import Demo, demo_lock
    from ackfold_dev.local_endpoints import with_local_endpoints
    from ackfold_dev.stack import start_sources, stop_all

    settings = with_local_endpoints(settings)

    # SQS or Kafka on loopback, unless remote or already running.
    sources = start_sources(settings, emit)
    try:
        # The app's DAG, if it has one, waits: one driver of its queries at a time.
        with demo_lock(settings, "ackfold demo", say=emit):
            spark = spark_session(settings, "ackfold-demo")
            try:
                demo = Demo(spark, settings, messages=messages, faults=faults, say=emit)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            report = demo.run()
            if args.json:
                emit(json.dumps(report.as_dict(), indent=2))
            if args.keep_running:
                stop = threading.Event()
                try:
                    demo.keep_running(stop, airflow=args.airflow)
                except KeyboardInterrupt:
                    stop.set()
                except RuntimeError as exc:
                    print(f"ackfold: the demo app stopped: {exc}", file=sys.stderr)
                    return 1
    finally:
        stop_all(sources)
    return 0 if report.ok else 1


def _up(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold_dev.local_endpoints import with_local_endpoints
    from ackfold_dev.stack import run_stack

    return run_stack(with_local_endpoints(settings), demo=not args.no_demo, verbose=args.verbose)


def _sqs(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold_dev.elasticmq import ElasticMQ, ElasticMQError
    from ackfold_dev.local_endpoints import with_local_endpoints

    try:
        return ElasticMQ(with_local_endpoints(settings)).serve_forever()
    except ElasticMQError as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def _s3(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold_dev.s3 import LocalS3, LocalS3Error

    port = _port(args.port, "--port")
    # Its journal keeps the buckets across restarts, under var/s3.
    server = LocalS3(settings.var_dir / "s3", port=port, bucket=args.bucket.strip() or None)
    try:
        return server.serve_forever()
    except LocalS3Error as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def _store(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold_dev.azurite import LocalAzure
    from ackfold_dev.emulated import LocalStoreError
    from ackfold_dev.emulators import EmulatorMissing
    from ackfold_dev.gcs import LocalGCS

    port = _port(args.port, "--port")
    kind = LocalGCS if args.command == "gcs" else LocalAzure
    # Its data is kept across restarts, under var/<gcs|azure>.
    server = kind(settings.var_dir / args.command, port=port)
    server.container = args.container.strip() or None
    try:
        return server.serve_forever()
    except (LocalStoreError, EmulatorMissing) as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def _kafka(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold_dev.kafka_broker import KafkaBroker

    try:
        return KafkaBroker(settings).serve_forever()
    except SourceError as exc:  # the broker cannot start (KafkaBrokerError), or answer
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def _cluster(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold_dev.cluster import ClusterError, LocalCluster

    workers, cores = _whole(args.workers, "--workers"), _whole(args.cores, "--cores")
    port, webui_port = _port(args.port, "--port"), _port(args.webui_port, "--webui-port")
    try:
        cluster = LocalCluster(
            settings.var_dir / "cluster", workers=workers, cores=cores, memory=args.memory,
            port=port, webui_port=webui_port,
        )  # fmt: skip
    except ClusterError as exc:
        raise UsageError(str(exc)) from None
    try:
        return cluster.serve_forever()
    except ClusterError as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def _connect(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold_dev.connect import ConnectServerError, LocalConnectServer

    port = _port(args.port, "--port")
    try:
        return LocalConnectServer(settings, port=port).serve_forever()
    except ConnectServerError as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def _whole(text: str, option: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise UsageError(f"{option} must be a whole number of at least 1, got {text!r}")
    return int(text)


def _port(text: str, option: str) -> int:
    port = _whole(text, option)
    if port > 65535:
        raise UsageError(f"{option} must be a port number, 1 to 65535, got {port}")
    return port
