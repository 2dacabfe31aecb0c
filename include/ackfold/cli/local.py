"""`ackfold setup`, `up`, `sqs`, `s3`, `kafka`, `cluster` and `connect`: the jar cache, the embedded
stack, and the local servers, each run until Ctrl-C."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ackfold.cli.common import AddCommand, UsageError
from ackfold.sources.base import SourceError
from ackfold.spark.jars import BUNDLES

if TYPE_CHECKING:
    from ackfold.config import Settings


def add_commands(command: AddCommand) -> None:
    """Register `ackfold setup`, `up`, `sqs`, `kafka`, `cluster`, `connect`, with their
    arguments."""
    setup = command("setup", _setup, "download the pinned JVM jars into the local cache (once)")
    setup.add_argument(
        "--bundle", action="append", choices=sorted(BUNDLES), help="only this bundle"
    )
    up = command("up", _up, "run the embedded stack (airflow standalone) until Ctrl-C")
    up.add_argument(
        "--no-demo", action="store_true", help="do not start the word-count demo with it"
    )
    command("sqs", _sqs, "run the local ElasticMQ (SQS) server with the demo queues until Ctrl-C")
    s3 = command(
        "s3",
        _s3,
        "run the local S3 API (moto, atomic conditional writes) with a bucket until Ctrl-C",
    )
    s3.add_argument("--port", default="9020", help="its port on 127.0.0.1 (default 9020)")
    s3.add_argument("--bucket", default="ackfold", help="the bucket to create (default ackfold)")
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


def _setup(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.spark.jars import setup

    assert settings.jars_dir is not None
    setup(settings.jars_dir, args.bundle or None)
    print(f"JVM artifacts ready in {settings.jars_dir}")
    return 0


def _up(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.local.stack import run_stack

    return run_stack(settings, demo=not args.no_demo, verbose=args.verbose)


def _sqs(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.local.elasticmq import ElasticMQ, ElasticMQError

    try:
        return ElasticMQ(settings).serve_forever()
    except ElasticMQError as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def _s3(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.local.s3 import LocalS3, LocalS3Error

    port = _whole(args.port, "--port")
    if port > 65535:
        raise UsageError(f"--port must be a port number, 1 to 65535, got {port}")
    # Its journal keeps the buckets across restarts, under var/s3.
    server = LocalS3(settings.var_dir / "s3", port=port, bucket=args.bucket.strip() or None)
    try:
        return server.serve_forever()
    except LocalS3Error as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def _kafka(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.local.kafka_broker import KafkaBroker

    try:
        return KafkaBroker(settings).serve_forever()
    except SourceError as exc:  # the broker cannot start (KafkaBrokerError), or answer
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def _cluster(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.local.cluster import ClusterError, LocalCluster

    workers, cores = _whole(args.workers, "--workers"), _whole(args.cores, "--cores")
    port, webui_port = _whole(args.port, "--port"), _whole(args.webui_port, "--webui-port")
    for value, option in ((port, "--port"), (webui_port, "--webui-port")):
        if value > 65535:
            raise UsageError(f"{option} must be a port number, 1 to 65535, got {value}")
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
    from ackfold.local.connect import ConnectServerError, LocalConnectServer

    port = _whole(args.port, "--port")
    if port > 65535:
        raise UsageError(f"--port must be a port number, 1 to 65535, got {port}")
    try:
        return LocalConnectServer(settings, port=port).serve_forever()
    except ConnectServerError as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def _whole(text: str, option: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise UsageError(f"{option} must be a whole number of at least 1, got {text!r}")
    return int(text)
