"""`ackfold replay`: send failed, timed-out or dead-lettered roots back to their source
queues, after showing the plan (and asking, above `replay.confirm_above` messages)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ackfold.cli.common import (
    AddCommand,
    UsageError,
    add_selection,
    add_wait,
    check_app,
    emit,
    ledger_error,
    say_on_stderr,
    spark_session,
)

if TYPE_CHECKING:
    from ackfold.config import Settings


def add_commands(command: AddCommand) -> None:
    """Register `ackfold replay`, with their arguments."""
    replay = command(
        "replay",
        _replay,
        "send failed, timed-out or dead-lettered roots back to their source queues",
    )
    add_selection(replay, "roots")
    replay.add_argument(
        "--status",
        action="append",
        metavar="S[,S...]",
        help="which roots (default failed,timed_out): failed, timed_out, dead_lettered",
    )
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
    add_wait(replay)


def _replay(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.errors import LedgerError
    from ackfold.ledger.reading.reader import LedgerReader
    from ackfold.ledger.schema.ids import format_id

    request = _replay_request(args)
    if args.auto and (args.root or args.status or args.since or args.until):
        raise UsageError("--auto follows each app's policy: it takes only --app, --limit, --rate")
    reader = LedgerReader(settings.table_root)
    try:
        check_app(settings, reader, request.app)
        missing = reader.missing_roots(request.root_ids)
    except LedgerError as exc:
        return ledger_error(exc)
    if missing:
        listed = ", ".join(format_id(r) for r in missing)
        return ledger_error(Exception(f"unknown root id(s), not in root_state: {listed}"))

    from ackfold.progress import Progress
    from ackfold.replay.planner import Plan, UnknownRoots
    from ackfold.runs.replay import run_replay
    from ackfold.runs.replayer import unsent_error
    from ackfold.ui.redact import redactor_for

    shown: list[Plan] = []
    bar: list[Progress] = []

    def show(plan: Plan) -> None:
        """The plan, before anything is sent; asks above `replay.confirm_above`."""
        if not plan.selected:
            raise _NothingToReplay(f"no roots match {request.describe()}: nothing to replay")
        # Fail reasons can quote records: masked as in the UI (`ui.redact_*`).
        for line in format_plan(plan, redactor_for(settings.ui)):
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
        shown.append(plan)
        bar.append(Progress("replay", count, unit="sent"))

    # The ledger's turn is taken before Spark starts (a DAG run on another host may hold
    # it), and held from the plan to the last send: another replay planning the same
    # roots would send them too.
    try:
        summary = run_replay(
            settings,
            request,
            spark=lambda: spark_session(settings, "ackfold-replay"),
            on_plan=show,
            progress=lambda done, total: bar[0].update(done, total),
            wait=args.wait,
            say=say_on_stderr,
            holder=f"ackfold replay ({request.requested_by})",
        )
    except (UnknownRoots, _NothingToReplay) as exc:
        return ledger_error(exc)
    plan = shown[0]
    if plan.to_send and not request.dry_run:
        bar[0].close()
    emit(json.dumps(summary.as_dict(), indent=2) if args.json else format_summary(summary))
    if summary.not_sent:
        return ledger_error(unsent_error(summary))
    return 0 if (plan.to_send or plan.sends) else 1


class _NothingToReplay(Exception):
    """The request selects no root: said before anything is logged."""


def _replay_request(args: argparse.Namespace) -> Any:
    from ackfold.cli.common import parse_selection
    from ackfold.ledger.reading.parse import QueryError, parse_rate, parse_statuses
    from ackfold.replay.request import DEFAULT_STATUSES, ReplayRequest

    selection = parse_selection(args)
    try:
        statuses = parse_statuses(args.status) if args.status else DEFAULT_STATUSES
        rate = parse_rate(args.rate) if args.rate is not None else None
        return ReplayRequest(
            **selection,
            statuses=statuses,
            rate=rate,
            dry_run=args.dry_run,
            automatic=args.auto,
        )
    except (QueryError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def format_plan(plan: Any, redactor: Any) -> list[str]:
    """One line per planned send, its fail reason masked by `redactor` (an
    `ackfold.ui.redact.Redactor`), then the skipped roots by reason."""
    from ackfold.ledger.schema.ids import format_id
    from ackfold.ledger.schema.values import one_line
    from ackfold.ui.redact import masked_text

    verb = "would send" if plan.request.dry_run else "sending"
    lines = []
    for p in plan.sends:
        what = "dead letter" if p.action == "dead_letter" else f"attempt {p.attempt}"
        note = {"unsent": " (planned before, never marked sent)", "sent": " (already sent)"}
        lines.append(
            f"{verb} {format_id(p.root_id)} {p.app} {p.prior_status} -> {what} to {p.target}"
            f"{note.get(p.state, '')}: {one_line(masked_text(redactor, p.reason), 80)}"
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
