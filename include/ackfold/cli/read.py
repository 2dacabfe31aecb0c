"""`ackfold roots` and `ackfold show`: the ledger read without a JVM, masked as in the UI,
printed as aligned tables or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Final

from ackfold.cli.common import AddCommand, UsageError, emit, ledger_error
from ackfold.ledger.schema.ids import format_id
from ackfold.ledger.schema.status import ALL as STATUSES
from ackfold.ledger.schema.values import hex64, iso, one_line

if TYPE_CHECKING:
    from ackfold.config import Settings
    from ackfold.effects import RootEffects
    from ackfold.ledger.reading.rows import Journey, RootPage


def add_commands(command: AddCommand) -> None:
    """Register `ackfold roots` and `ackfold show`, with their arguments."""
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
    show = command("show", _show, "show one root: its state, events by stage, attempts, effects")
    show.add_argument(
        "root_id", metavar="ROOT_ID", help="the root id (as `ackfold roots` lists it)"
    )
    show.add_argument("--json", action="store_true", help="print JSON")


def _roots(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.errors import LedgerError
    from ackfold.ledger.reading.parse import QueryError, RootQuery
    from ackfold.ledger.reading.reader import LedgerReader

    try:
        query = RootQuery.parse(
            statuses=args.status, app=args.app, since=args.since, limit=args.limit
        )
    except QueryError as exc:
        raise UsageError(str(exc)) from None
    try:
        page = LedgerReader(settings.table_root).list_roots(query)
    except LedgerError as exc:
        return ledger_error(exc)
    from dataclasses import replace

    from ackfold.ui.redact import masked_state, redactor_for

    # Fail reasons can quote records: masked as in the UI (`ui.redact_*`).
    redactor = redactor_for(settings.ui)
    page = replace(page, roots=[masked_state(redactor, root) for root in page.roots])
    if args.json:
        emit(format_roots_json(page))
    elif page.roots:
        emit(format_roots(page))
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
    from ackfold.ledger.errors import LedgerError
    from ackfold.ledger.reading.parse import QueryError, parse_root_id
    from ackfold.ledger.reading.reader import LedgerReader

    try:
        root_id = parse_root_id(args.root_id)
    except QueryError as exc:
        raise UsageError(str(exc)) from None
    try:
        journey = LedgerReader(settings.table_root).show_root(root_id)
    except LedgerError as exc:
        return ledger_error(exc)
    from ackfold.ui.redact import masked_journey, redactor_for

    # The payload preview and the reasons, masked as in the UI (`ui.redact_*`).
    journey = masked_journey(redactor_for(settings.ui), journey, payload=True)
    effects = _effects(settings, journey)
    if args.json:
        emit(format_journey_json(journey, effects))
    else:
        emit(format_journey(journey) + "\n\n" + format_effects(effects))
    return 0


def _effects(settings: Settings, journey: Journey) -> RootEffects:
    """The root's origin's rows in its app's declared outputs (`ackfold.effects`)."""
    from ackfold.effects import RootRef, find_effects

    s = journey.state
    root = RootRef(s.root_id, s.app, journey.origin_root_id, s.attempt, s.status)
    return find_effects(settings, [root])[0]


def format_effects(effects: RootEffects) -> str:
    """`ackfold show`'s effects: per declared output of the root's app, its origin's rows
    there, with a few of them; or why the output cannot be read."""
    lines = [f"effects (rows of origin {format_id(effects.root.origin_root_id)} in the app's "
             "declared outputs)"]  # fmt: skip
    if not effects.outputs:
        lines.append(
            "  (none declared: outputs written through write_batch declare themselves; "
            "others with `ackfold outputs --declare` or apps.<app>.outputs)"
        )
    for o in effects.outputs:
        if o.problem is not None:
            lines.append(f"  {o.output.output}  cannot read: {one_line(o.problem, 200)}")
            continue
        clean = ", marked clean" if o.output.clean else ""
        if o.read_by_stage:
            clean += " (a stage reads it: a retract leaves these)"
        lines.append(f"  {o.output.output}  {o.rows} row(s){clean}")
        lines.extend(f"    {one_line(json.dumps(row, sort_keys=True), 120)}" for row in o.sample)
        if o.rows > len(o.sample):
            lines.append(f"    ... {o.rows - len(o.sample)} more")
    return "\n".join(lines)


_ROOTS_HEADER: Final = (
    "ROOT_ID",
    "APP",
    "STATUS",
    "ATTEMPT",
    "LAST_STAGE",
    "EVENTS",
    "LAST_EVENT_AT",
    "FAIL_REASON",
)


def format_roots(page: RootPage) -> str:
    """`ackfold roots`: an aligned table, newest first (no trailing newline)."""
    rows = [_ROOTS_HEADER] + [
        (
            format_id(r.root_id),
            one_line(r.app, 24),
            one_line(r.status, 16),
            str(r.attempt) if r.attempt is not None else "-",
            one_line(r.last_stage, 20),
            str(r.event_count),
            iso(r.last_event_at),
            one_line(r.fail_reason, 48) if r.fail_reason else "",
        )
        for r in page.roots
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_ROOTS_HEADER))]
    # Right-align the numbers, left-align the rest; no padding after the last column.
    right = {3, 5}
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def format_roots_json(page: RootPage) -> str:
    """`ackfold roots --json`: a JSON array, one root per line."""
    if not page.roots:
        return "[]"
    items = ",\n".join(json.dumps(r.to_json(), sort_keys=True) for r in page.roots)
    return f"[\n{items}\n]"


def format_journey(journey: Journey) -> str:
    """`ackfold show`: the root's state, its source, its events by stage, its attempts."""
    from ackfold.ledger.reading.reader import PAYLOAD_PREVIEW

    s = journey.state
    lines = [f"root {format_id(s.root_id)}"]

    def put(label: str, value: str) -> None:
        lines.append(f"  {label:<13} {value}")

    put("app", one_line(s.app))
    put("status", f"{one_line(s.status)} (since {iso(s.status_changed_at)})")
    if not s.init_seen:
        tree = "init not seen"
    elif s.xor_acc == 0:
        tree = "init seen, tree complete"
    else:
        tree = "init seen, tree incomplete"
    put("xor_acc", f"{hex64(s.xor_acc)} ({tree})")
    attempt = str(s.attempt) if s.attempt is not None else "-"
    put("attempt", f"{attempt} of origin {format_id(journey.origin_root_id)}")
    put("events", f"{s.event_count} folded, {iso(s.first_event_at)} .. {iso(s.last_event_at)}")
    if journey.unreconciled:
        put("", f"{journey.unreconciled} more in ack_events, not reconciled yet")
    put("last stage", one_line(s.last_stage))
    if s.fail_reason is not None or s.fail_stage is not None:
        where = f" (stage {one_line(s.fail_stage)} at {iso(s.fail_at)})" if s.fail_stage else ""
        put("fail reason", one_line(s.fail_reason, PAYLOAD_PREVIEW) + where)
    else:
        put("fail reason", "-")
    src = journey.source
    if src is None:
        put("source", "- (no row in roots)")
    else:
        parts = [one_line(src.source)]
        if src.source_queue:
            parts.append(f"queue {one_line(src.source_queue)}")
        if src.source_message_id:
            parts.append(f"message {one_line(src.source_message_id)}")
        if src.source_position:
            parts.append(f"position {one_line(src.source_position)}")
        put("source", " ".join(parts))
        put("ingested at", iso(src.ingested_at))
        if src.payload_preview is None:
            put("payload", "-")
        elif src.payload_truncated:
            put(
                "payload",
                f"{one_line(src.payload_preview)}... "
                f"(truncated: first {PAYLOAD_PREVIEW} of {src.payload_chars} chars)",
            )
        else:
            put("payload", one_line(src.payload_preview))

    if journey.pending is not None:
        lines.append("")
        lines.append("why pending")
        lines.extend(f"  {one_line(line)}" for line in journey.pending.lines())

    lines.append("")
    lines.append(f"events by stage ({len(journey.events)} in ack_events)")
    if not journey.events:
        lines.append("  (none)")
    for stage, events in journey.stages:
        lines.append(f"  {one_line(stage)}")
        for e in events:
            line = f"    {iso(e.event_time)}  {e.kind:<4}  {hex64(e.ack_val)}"
            if e.reason is not None:
                line += f"  reason: {one_line(e.reason, PAYLOAD_PREVIEW)}"
            if e.duplicate:
                line += "  (duplicate, not folded)"
            lines.append(line)

    lines.append("")
    lines.append(f"attempts (origin {format_id(journey.origin_root_id)})")
    for a in journey.attempts:
        mark = "*" if a.root_id == s.root_id else " "
        shown = a.status if a.status is not None else "(not reconciled)"
        lines.append(
            f"  {mark} #{a.attempt:<3} {format_id(a.root_id)}  {shown:<16}"
            f"  ingested {iso(a.ingested_at)}"
        )
    return "\n".join(lines)


def format_journey_json(journey: Journey, effects: RootEffects | None = None) -> str:
    shown = journey.to_json()
    if effects is not None:
        shown["effects"] = effects.as_dict()
    return json.dumps(shown, indent=2, sort_keys=True)
