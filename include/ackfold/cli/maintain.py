"""`ackfold maintain`: one maintenance run of the ledger (`run_maintenance`), as the
`ackfold_maintenance` DAG runs it daily: retention, OPTIMIZE, VACUUM, checkpoints and log
cleanup, under the ledger's turn, on the engine `engine.kind` chooses. Each step is said
on stderr as it starts and ends; the summary goes to stdout (`--json`: as JSON).
`--dry-run` says what a run would delete and rewrite now, and changes nothing."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ackfold.cli.common import AddCommand, UsageError, add_wait, emit, say_on_stderr, spark_session

if TYPE_CHECKING:
    from ackfold.config import Settings


def add_commands(command: AddCommand) -> None:
    """Register `ackfold maintain`, with its arguments."""
    maintain = command(
        "maintain",
        _maintain,
        "maintain the ledger now: delete long-settled events, Z-order, VACUUM, clean up logs",
    )
    maintain.add_argument(
        "--dry-run",
        action="store_true",
        help="say what a run would delete and rewrite now; change nothing",
    )
    maintain.add_argument(
        "--now",
        metavar="ISO-TIME",
        help="the run's time for the retention's cut-off, instead of the clock (tests)",
    )
    maintain.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_wait(maintain)


def _maintain(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.reading.parse import QueryError, parse_time
    from ackfold.maintenance import run_maintenance

    try:
        now = parse_time(args.now, "--now") if args.now else None
    except (QueryError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    summary = run_maintenance(
        settings,
        spark=lambda: spark_session(settings, "ackfold-maintenance"),
        now=now,
        dry_run=args.dry_run,
        holder="ackfold maintain",
        wait=args.wait,
        say=say_on_stderr,
        progress=say_on_stderr,
    )
    emit(
        json.dumps(summary, indent=2, sort_keys=True, default=str)
        if args.json
        else describe(summary)
    )
    return 0


def describe(summary: dict[str, Any]) -> str:
    """The summary of a run (or a dry run) as a few lines, a step a line.

    Example:
        >>> print(describe({"dry_run": True, "retention_cutoff": "2026-01-01T00:00:00Z",
        ...     "roots_expired": 3, "events_deleted": 9, "reports_deleted": {"sent_messages": 1},
        ...     "optimized": ["ack_events"], "vacuumed": ["ack_events"],
        ...     "files_removed": 2, "bytes_removed": 2048}))
        dry run: nothing changed; a run now would
          retention: expire 3 root(s) settled before 2026-01-01T00:00:00Z: 9 event(s)
          retention: delete report rows: sent_messages 1
          optimize: Z-order or compact ack_events
          vacuum: delete 2 file(s), 2.0 KiB, from 1 table(s)
    """
    dry = bool(summary.get("dry_run"))
    seconds = summary.get("seconds_by_step") or {}

    def took(step: str) -> str:
        return f" ({seconds[step]:.1f} s)" if step in seconds else ""

    reports = ", ".join(f"{t} {n}" for t, n in (summary.get("reports_deleted") or {}).items())
    expired, events = summary.get("roots_expired", 0), summary.get("events_deleted", 0)
    optimized = ", ".join(summary.get("optimized") or []) or "nothing"
    files, size = summary.get("files_removed", 0), _size(int(summary.get("bytes_removed") or 0))
    tables = len(summary.get("vacuumed") or [])
    cutoff = summary.get("retention_cutoff")
    if summary.get("retention_since"):  # not a full pass: the roots changed since the last
        cutoff = f"{cutoff} (those changed since {summary['retention_since']})"
    if dry:
        return "\n".join([
            "dry run: nothing changed; a run now would",
            f"  retention: expire {expired} root(s) settled before {cutoff}: {events} event(s)",
            f"  retention: delete report rows: {reports or 'none'}",
            f"  optimize: Z-order or compact {optimized}",
            f"  vacuum: delete {files} file(s), {size}, from {tables} table(s)",
        ])  # fmt: skip
    kept = ", ".join(summary.get("logs_kept") or []) or "none"
    return "\n".join([
        f"maintained on the {summary.get('engine')} engine, lease epoch {summary.get('epoch')}, "
        f"in {summary.get('seconds', 0):.1f} s",
        f"  retention: {expired} root(s) settled before {cutoff} expired: {events} event(s) "
        f"deleted{took('retention')}",
        f"  retention: report rows deleted: {reports or 'none'}",
        f"  optimize: {optimized} Z-ordered or compacted{took('optimize')}",
        f"  vacuum: {files} file(s), {size}, deleted from {tables} table(s){took('vacuum')}",
        f"  logs: {len(summary.get('checkpointed') or [])} table(s) checkpointed; logs kept "
        f"whole: {kept}{took('logs')}",
    ])  # fmt: skip


def _size(count: int) -> str:
    """A byte count for people.

    Example:
        >>> _size(512), _size(2048), _size(5 * 2**30)
        ('512 B', '2.0 KiB', '5.0 GiB')
    """
    if count < 1024:
        return f"{count} B"
    value, unit = count / 1024, "KiB"
    for larger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.1f} {unit}"
