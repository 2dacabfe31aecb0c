"""What `ackfold roots` and `ackfold show` print: aligned tables, the journey, and JSON."""

from __future__ import annotations

import json
from typing import Final

from ackfold.ledger.reader import PAYLOAD_PREVIEW
from ackfold.ledger.rows import Journey, RootPage
from ackfold.ledger.values import hex64, iso, one_line

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
            str(r.root_id),
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
    right = {0, 3, 5}
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
    s = journey.state
    lines = [f"root {s.root_id} ({hex64(s.root_id)})"]

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
    put("attempt", f"{attempt} of origin {journey.origin_root_id}")
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
    lines.append(f"attempts (origin {journey.origin_root_id})")
    width = max(len(str(a.root_id)) for a in journey.attempts)
    for a in journey.attempts:
        mark = "*" if a.root_id == s.root_id else " "
        shown = a.status if a.status is not None else "(not reconciled)"
        lines.append(
            f"  {mark} #{a.attempt:<3} {a.root_id:>{width}}  {shown:<16}"
            f"  ingested {iso(a.ingested_at)}"
        )
    return "\n".join(lines)


def format_journey_json(journey: Journey) -> str:
    return json.dumps(journey.to_json(), indent=2, sort_keys=True)
