"""The `ackfold` command line.

Every error a user can cause (bad settings, a missing jar cache, bad arguments) ends in
one clear message on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ackfold import __version__
from ackfold.config import ConfigError, Settings, load_settings
from ackfold.ledger.status import ALL as STATUSES
from ackfold.local.jvm import BUNDLES, JarsError
from ackfold.sources.base import SourceError
from ackfold.spark import SparkMasterUnreachable

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input from the user: printed as is, exit code 2."""


def _setup(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.local.jvm import setup

    assert settings.jars_dir is not None
    setup(settings.jars_dir, args.bundle or None)
    print(f"JVM artifacts ready in {settings.jars_dir}")
    return 0


def _up(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.local.stack import run_stack

    return run_stack(settings, demo=not args.no_demo)


def _sqs(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.local.elasticmq import ElasticMQ, ElasticMQError

    try:
        return ElasticMQ(settings).serve_forever()
    except ElasticMQError as exc:
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


def _whole(text: str, option: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise UsageError(f"{option} must be a whole number of at least 1, got {text!r}")
    return int(text)


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

    from ackfold.demo.run import Demo
    from ackfold.local.stack import start_sources, stop_all
    from ackfold.spark import get_spark

    # SQS or Kafka on loopback, unless remote or already running.
    sources = start_sources(settings, _emit)
    try:
        spark = get_spark(settings, app_name="ackfold-demo")
        try:
            demo = Demo(spark, settings, messages=messages, faults=faults, say=_emit)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        report = demo.run()
        if args.json:
            _emit(json.dumps(report.as_dict(), indent=2))
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
    return 0 if report.lost == 0 and report.words_exact else 1


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.demo.run import status_file

    path = status_file(settings, args.app)
    if not path.is_file():
        print(f"ackfold: no status for app {args.app!r}: it has not run here ({path})",
              file=sys.stderr)  # fmt: skip
        return 1
    _emit(path.read_text())
    return 0


def _config(settings: Settings, args: argparse.Namespace) -> int:
    print(json.dumps(settings.model_dump(mode="json"), indent=2, sort_keys=True))
    return 0


def _smoke(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.smoke import check, run_smoke
    from ackfold.spark import get_spark

    report = run_smoke(get_spark(settings, "ackfold-smoke"), f"{settings.table_root}/smoke")
    print(json.dumps(report, sort_keys=True))
    return 0 if check(report) else 1


def _emit(text: str) -> None:
    """Print `text`; a reader that went away (`ackfold roots | head`) is not an error."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so the exit's flush has nowhere to fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _ledger_error(exc: Exception) -> int:
    print(f"ackfold: {exc}", file=sys.stderr)
    return 1


def _roots(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.cli.read import format_roots, format_roots_json
    from ackfold.ledger.parse import QueryError, RootQuery
    from ackfold.ledger.reader import LedgerReader
    from ackfold.ledger.sql import LedgerError

    try:
        query = RootQuery.parse(
            statuses=args.status, app=args.app, since=args.since, limit=args.limit
        )
    except QueryError as exc:
        raise UsageError(str(exc)) from None
    try:
        page = LedgerReader(settings.table_root).list_roots(query)
    except LedgerError as exc:
        return _ledger_error(exc)
    from dataclasses import replace

    from ackfold.ui.redact import masked_state, redactor_for

    # Fail reasons can quote records: masked as in the UI (`ui.redact_*`).
    redactor = redactor_for(settings.ui)
    page = replace(page, roots=[masked_state(redactor, root) for root in page.roots])
    if args.json:
        _emit(format_roots_json(page))
    elif page.roots:
        _emit(format_roots(page))
    else:
        print("ackfold: no roots match", file=sys.stderr)
    if page.more:
        print(
            f"ackfold: showing the newest {query.limit}; more roots match "
            "(raise --limit, or narrow with --status, --app, --since)",
            file=sys.stderr,
        )
    return 0


def _show(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.cli.read import format_journey, format_journey_json
    from ackfold.ledger.parse import QueryError, parse_root_id
    from ackfold.ledger.reader import LedgerReader
    from ackfold.ledger.sql import LedgerError

    try:
        root_id = parse_root_id(args.root_id)
    except QueryError as exc:
        raise UsageError(str(exc)) from None
    try:
        journey = LedgerReader(settings.table_root).show_root(root_id)
    except LedgerError as exc:
        return _ledger_error(exc)
    from ackfold.ui.redact import masked_journey, redactor_for

    # The payload preview and the reasons, masked as in the UI (`ui.redact_*`).
    journey = masked_journey(redactor_for(settings.ui), journey, payload=True)
    _emit(format_journey_json(journey) if args.json else format_journey(journey))
    return 0


def _reconcile(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.parse import QueryError, parse_time
    from ackfold.ledger.reader import LedgerReader
    from ackfold.ledger.sql import LedgerError
    from ackfold.reconcile.reconciler import check_app_name

    try:
        now = parse_time(args.now, "--now") if args.now else None
        if args.app:
            check_app_name(args.app)
    except (QueryError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    # Check what can be checked without a JVM first: an empty ledger, an unknown app.
    reader = LedgerReader(settings.table_root)
    try:
        _check_app(settings, reader, args.app)
    except LedgerError as exc:
        return _ledger_error(exc)

    from ackfold.reconcile.reconciler import reconcile
    from ackfold.spark import get_spark

    spark = get_spark(settings, app_name="ackfold-reconcile")
    summary = reconcile(spark, settings, now=now, app=args.app)
    if args.replay:
        from ackfold.replay.replayer import ReplayError, replay
        from ackfold.replay.request import ReplayRequest

        request = ReplayRequest(automatic=True, app=args.app, requested_by="auto")
        try:
            summary["replay"] = replay(spark, settings, request, now=now).as_dict()
        except ReplayError as exc:
            _emit(json.dumps(summary, indent=2))
            return _ledger_error(exc)
    _emit(json.dumps(summary, indent=2))
    return 0


def _quality(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.parse import QueryError, parse_time
    from ackfold.ledger.reader import LedgerReader
    from ackfold.ledger.sql import LedgerError
    from ackfold.reconcile.reconciler import check_app_name

    try:
        now = parse_time(args.now, "--now") if args.now else None
        if args.app:
            check_app_name(args.app)
    except (QueryError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    try:
        _check_app(settings, LedgerReader(settings.table_root), args.app)
    except LedgerError as exc:
        return _ledger_error(exc)

    from ackfold.quality import run_quality
    from ackfold.spark import get_spark

    spark = get_spark(settings, app_name="ackfold-quality")
    report = run_quality(
        spark, settings, app=args.app, now=now, say=lambda text: print(text, file=sys.stderr)
    )
    _emit(json.dumps(report.as_dict(), indent=2) if args.json else report.format(verbose=args.all))
    return 0 if report.passed else 1


def _check_app(settings: Settings, reader: Any, app: str | None) -> None:
    """Raise `LedgerError` for an app neither configured nor seen in the ledger, and
    `NoLedger` when there is no ledger yet: both without starting a JVM."""
    from ackfold.ledger.sql import LedgerError

    if app and app not in settings.apps and not reader.app_has_events(app):
        known = ", ".join(sorted(settings.apps)) or "none configured"
        raise LedgerError(f"unknown app {app!r}: no event of it in the ledger (apps: {known})")
    if not app:
        reader.app_has_events("")  # raises NoLedger when ack_events does not exist yet


def _replay_request(args: argparse.Namespace) -> Any:
    from ackfold.ledger.parse import (
        QueryError,
        parse_limit,
        parse_root_id,
        parse_statuses,
        parse_time,
    )
    from ackfold.reconcile.reconciler import check_app_name
    from ackfold.replay.request import DEFAULT_STATUSES, ReplayRequest

    try:
        root_ids = tuple(parse_root_id(text) for text in args.root or ())
        statuses = parse_statuses(args.status) if args.status else DEFAULT_STATUSES
        if args.app:
            check_app_name(args.app)
        rate = _positive_number(args.rate, "--rate") if args.rate is not None else None
        return ReplayRequest(
            root_ids=root_ids,
            app=args.app,
            statuses=statuses,
            since=parse_time(args.since, "--since") if args.since else None,
            until=parse_time(args.until, "--until") if args.until else None,
            limit=parse_limit(args.limit) if args.limit is not None else None,
            rate=rate,
            dry_run=args.dry_run,
            automatic=args.auto,
        )
    except (QueryError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _positive_number(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{option} must be a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{option} must be a positive number, got {text!r}")
    return value


def _replay(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.reader import LedgerReader
    from ackfold.ledger.sql import LedgerError
    from ackfold.ledger.values import hex64

    request = _replay_request(args)
    if args.auto and (args.root or args.status or args.since or args.until):
        raise UsageError("--auto follows each app's policy: it takes only --app, --limit, --rate")
    reader = LedgerReader(settings.table_root)
    try:
        _check_app(settings, reader, request.app)
        missing = reader.missing_roots(request.root_ids)
    except LedgerError as exc:
        return _ledger_error(exc)
    if missing:
        listed = ", ".join(hex64(r) for r in missing)
        return _ledger_error(Exception(f"unknown root id(s), not in root_state: {listed}"))

    from ackfold.cli.progress import Progress
    from ackfold.ledger.lock import ledger_lock
    from ackfold.replay.planner import UnknownRoots
    from ackfold.replay.replayer import Replayer, unsent_error
    from ackfold.spark import get_spark

    replayer = Replayer(get_spark(settings, app_name="ackfold-replay"), settings)
    # From the plan to the last send: another replay planning the same roots would send
    # them too (reconciles and replays wait, and say for whom).
    holder = f"ackfold replay ({request.requested_by})"
    with ledger_lock(settings.var_dir, holder, say=lambda text: print(text, file=sys.stderr)):
        try:
            plan = replayer.plan(request)
        except UnknownRoots as exc:
            return _ledger_error(exc)
        if not plan.selected:
            return _ledger_error(
                Exception(f"no roots match {request.describe()}: nothing to replay")
            )
        for line in format_plan(plan):
            print(line, file=sys.stderr)
        count = len(plan.to_send)
        if not request.dry_run and count > settings.replay.confirm_above and not args.yes:
            question = (
                f"send {count} messages (replay.confirm_above is {settings.replay.confirm_above})?"
            )
            if not (
                sys.stdin.isatty() and input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
            ):
                raise UsageError(f"{question} Not without --yes (or try --dry-run first).")
        progress = Progress("replay", count, unit="sent")
        summary = replayer.execute(plan, progress=progress.update)
    if count and not request.dry_run:
        progress.close()
    _emit(json.dumps(summary.as_dict(), indent=2) if args.json else format_summary(summary))
    if summary.not_sent:
        return _ledger_error(unsent_error(summary))
    return 0 if (plan.to_send or plan.sends) else 1


def format_plan(plan: Any) -> list[str]:
    """One line per planned send, then the skipped roots by reason."""
    from ackfold.ledger.values import hex64, one_line

    verb = "would send" if plan.request.dry_run else "sending"
    lines = []
    for p in plan.sends:
        what = "dead letter" if p.action == "dead_letter" else f"attempt {p.attempt}"
        note = {"unsent": " (planned before, never marked sent)", "sent": " (already sent)"}
        lines.append(
            f"{verb} {hex64(p.root_id)} {p.app} {p.prior_status} -> {what} to {p.target}"
            f"{note.get(p.state, '')}: {one_line(p.reason, 80)}"
        )
    for reason, n in sorted(plan.skipped.items()):
        lines.append(f"skipping {n} root(s): {reason}")
    return lines


def format_summary(summary: Any) -> str:
    head = "dry run, nothing sent" if summary.dry_run else f"replay {summary.replay_id}"
    parts = [
        f"selected {summary.selected}",
        f"sent {summary.sent}",
        f"dead-lettered {summary.dead_lettered}",
        f"resent {summary.resent} (possible duplicates)",
        f"already sent {summary.already_sent}",
        f"not sent {summary.not_sent}",
        f"skipped {sum(summary.skipped.values())}",
    ]
    return f"{head}: " + ", ".join(parts)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ackfold",
        description="Guaranteed message processing for Spark streaming: ledger, reconcile, replay.",
    )
    parser.add_argument("--version", action="version", version=f"ackfold {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, func: Callable[[Settings, argparse.Namespace], int], help: str
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(func=func)
        return sub

    setup = command("setup", _setup, "download the pinned JVM jars into the local cache (once)")
    setup.add_argument(
        "--bundle", action="append", choices=sorted(BUNDLES), help="only this bundle"
    )
    up = command("up", _up, "run the embedded stack (airflow standalone) until Ctrl-C")
    up.add_argument(
        "--no-demo", action="store_true", help="do not start the word-count demo with it"
    )
    command("sqs", _sqs, "run the local ElasticMQ (SQS) server with the demo queues until Ctrl-C")
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
    replay = command(
        "replay",
        _replay,
        "send failed, timed-out or dead-lettered roots back to their source queues",
    )
    replay.add_argument(
        "--root", nargs="+", action="extend", metavar="ID", help="only these root ids"
    )
    replay.add_argument("--app", metavar="APP", help="only the roots of this app")
    replay.add_argument(
        "--status",
        action="append",
        metavar="S[,S...]",
        help="which roots (default failed,timed_out): failed, timed_out, dead_lettered",
    )
    replay.add_argument(
        "--since", metavar="TIME", help="only roots whose status changed at or after TIME"
    )
    replay.add_argument(
        "--until", metavar="TIME", help="only roots whose status changed before TIME"
    )
    replay.add_argument("--limit", metavar="N", help="at most N roots, oldest first")
    replay.add_argument(
        "--rate", metavar="MSGS_PER_S", help="send at most this many messages per second"
    )
    replay.add_argument(
        "--dry-run", action="store_true", help="report what would be sent; send nothing"
    )
    replay.add_argument(
        "--yes", action="store_true", help="do not ask above replay.confirm_above messages"
    )
    replay.add_argument(
        "--auto",
        action="store_true",
        help="the automatic replay: each app's policy (attempts, backoff) decides, and roots "
        "out of attempts are dead-lettered",
    )
    replay.add_argument("--json", action="store_true", help="print the summary as JSON")
    demo = command(
        "demo",
        _demo,
        "run the word-count demo on SQS with seeded faults, then print its delivery report",
    )
    from ackfold.demo.flags import add_demo_flags

    add_demo_flags(demo)
    demo.add_argument(
        "--keep-running", action="store_true", help="after the report, keep the app running"
    )
    demo.add_argument(
        "--airflow",
        action="store_true",
        help="with --keep-running: leave reconcile and replay to the Airflow DAGs (make run)",
    )
    demo.add_argument("--json", action="store_true", help="also print the report as JSON")
    status = command("status", _status, "the status of a running app, as it last wrote it")
    status.add_argument("--app", default="wordcount", help="the app (default wordcount)")
    command("config", _config, "print the effective configuration as JSON")
    command("smoke", _smoke, "run the Delta round trip in local Spark")
    reconcile = command(
        "reconcile", _reconcile, "fold new ledger events into root_state; print roots by status"
    )
    reconcile.add_argument("--app", metavar="APP", help="only this app's events")
    reconcile.add_argument(
        "--replay",
        action="store_true",
        help="then run the automatic replay (as `ackfold replay --auto`)",
    )
    reconcile.add_argument(
        "--now",
        metavar="ISO-TIME",
        help="classify timeouts as of this time instead of the clock (replays, tests)",
    )
    quality = command(
        "quality",
        _quality,
        "check the delivery guarantees and the ledger with Great Expectations; exit 1 if "
        "any is violated",
    )
    quality.add_argument("--app", metavar="APP", help="only this app's roots and events")
    quality.add_argument(
        "--now", metavar="ISO-TIME", help="check as of this time instead of the clock"
    )
    quality.add_argument("--all", action="store_true", help="list every check, not only failures")
    quality.add_argument("--json", action="store_true", help="print the report as JSON")
    roots = command("roots", _roots, "list roots from root_state, newest last event first")
    roots.add_argument(
        "--status",
        action="append",
        metavar="S[,S...]",
        help="only these statuses (comma-separated or repeated): " + ", ".join(STATUSES),
    )
    roots.add_argument("--app", metavar="APP", help="only the roots of this app")
    roots.add_argument(
        "--since",
        metavar="TIME",
        help="only roots whose last event is at or after TIME (ISO-8601, e.g. "
        "2026-11-22T10:00:00Z; a time without offset is UTC)",
    )
    roots.add_argument("--limit", metavar="N", help="at most N roots (default 50)")
    roots.add_argument("--json", action="store_true", help="print a JSON array")
    show = command("show", _show, "show one root: its state, events by stage, attempts")
    show.add_argument(
        "root_id", metavar="ROOT_ID", help="the root id (as `ackfold roots` lists it)"
    )
    show.add_argument("--json", action="store_true", help="print JSON")
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, run the command, and turn user errors into messages and exit codes."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
        code: int = args.func(settings, args)
        return code
    except (ConfigError, JarsError, UsageError) as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (SparkMasterUnreachable, SourceError) as exc:
        # A source queue that cannot be reached or refuses: say which, no traceback.
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1


def main() -> None:
    code = run()
    sys.stdout.flush()
    sys.stderr.flush()
    if "deltalake" in sys.modules:
        # delta-rs can abort at interpreter exit (delta-rs#2184): leave without the teardown.
        os._exit(code)
    sys.exit(code)
