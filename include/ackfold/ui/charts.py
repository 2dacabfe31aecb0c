"""Inline SVG charts, drawn on the server: no script and no CDN in the browser.

Every text that reaches an SVG (stage names, statuses, times) goes through `escape`;
numbers are formatted here. Colours are CSS classes (`ackfold.css`), one per status or
event kind, so the legend and the badges use the same ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from markupsafe import Markup, escape

from ackfold.ledger.reading.rows import Journey
from ackfold.ledger.schema import status
from ackfold.ledger.schema.contract import EVENT_KINDS
from ackfold.ledger.schema.values import iso
from ackfold.ui.results import Bucket

WIDTH = 720
_LEFT = 48  # room for the y axis labels


def _svg(height: int, body: list[str], label: str) -> Markup:
    return Markup(  # noqa: S704 - every text inside was escaped by its builder
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
        + "".join(body)
        + "</svg>"
    )


def _label(moment: datetime, bucket_seconds: int) -> str:
    text = iso(moment)
    return text[:10] if bucket_seconds >= 86400 else text[5:16].replace("T", " ")


def status_bars(buckets: Sequence[Bucket], bucket_seconds: int, height: int = 200) -> Markup:
    """Stacked bars: roots by status, per bucket of their first event's time."""
    plot = height - 24
    top = max((sum(b.counts.values()) for b in buckets), default=0) or 1
    step = (WIDTH - _LEFT) / max(len(buckets), 1)
    body = [
        f'<text class="axis" x="{_LEFT - 6}" y="12" text-anchor="end">{top}</text>',
        f'<text class="axis" x="{_LEFT - 6}" y="{plot}" text-anchor="end">0</text>',
        f'<line class="axis" x1="{_LEFT}" y1="{plot}" x2="{WIDTH}" y2="{plot}"/>',
    ]
    for i, bucket in enumerate(buckets):
        x, y = _LEFT + i * step, float(plot)
        tip = ", ".join(f"{n} {name}" for name, n in bucket.counts.items() if n)
        body.append(
            f"<g><title>{escape(_label(bucket.start, bucket_seconds))}: {escape(tip)}</title>"
        )
        for name in status.ALL:
            n = bucket.counts.get(name, 0)
            if n:
                h = n / top * (plot - 8)
                y -= h
                body.append(
                    f'<rect class="s-{name}" x="{x + 1:.1f}" y="{y:.1f}" '
                    f'width="{max(step - 2, 1):.1f}" height="{h:.1f}"/>'
                )
        body.append("</g>")
    body += _x_labels([b.start for b in buckets], bucket_seconds, step, height)
    return _svg(height, body, "roots by status over time")


def latency_lines(buckets: Sequence[Bucket], bucket_seconds: int, height: int = 160) -> Markup:
    """Complete latency p50 and p99 (seconds) per bucket, as two lines."""
    plot = height - 24
    values = [v for b in buckets for v in (b.p50_seconds, b.p99_seconds) if v is not None]
    top = max(values, default=0.0) or 1.0
    step = (WIDTH - _LEFT) / max(len(buckets), 1)
    body = [
        f'<text class="axis" x="{_LEFT - 6}" y="12" text-anchor="end">{duration(top)}</text>',
        f'<text class="axis" x="{_LEFT - 6}" y="{plot}" text-anchor="end">0</text>',
        f'<line class="axis" x1="{_LEFT}" y1="{plot}" x2="{WIDTH}" y2="{plot}"/>',
    ]
    # p99 first, wide and pale, p50 over it, narrow: where they are equal (latencies of
    # one size), both still show.
    for name, radius in (("p99", 4.5), ("p50", 2.5)):
        points, marks = [], []
        for i, bucket in enumerate(buckets):
            value = getattr(bucket, f"{name}_seconds")
            if value is not None:
                x = _LEFT + (i + 0.5) * step
                y = plot - value / top * (plot - 8)
                points.append(f"{x:.1f},{y:.1f}")
                marks.append(
                    f'<circle class="l-{name}" cx="{x:.1f}" cy="{y:.1f}" r="{radius}">'
                    f"<title>{name} {duration(value)}</title></circle>"
                )
        body.append(f'<g class="series" data-series="{name}" data-points="{len(points)}">')
        if len(points) > 1:
            body.append(f'<polyline class="l-{name}" points="{" ".join(points)}"/>')
        body += marks
        body.append("</g>")
    body += _x_labels([b.start for b in buckets], bucket_seconds, step, height)
    return _svg(height, body, "complete latency p50 and p99 over time")


def _x_labels(
    starts: Sequence[datetime], bucket_seconds: int, step: float, height: int
) -> list[str]:
    if not starts:
        return []
    picks = sorted({0, len(starts) // 2, len(starts) - 1})
    anchors = {0: "start", len(starts) - 1: "end"}
    return [
        f'<text class="axis" x="{_LEFT + (i + (i == len(starts) - 1)) * step:.1f}" '
        f'y="{height - 6}" text-anchor="{anchors.get(i, "middle")}">'
        f"{escape(_label(starts[i], bucket_seconds))}</text>"
        for i in picks
    ]


def timeline(journey: Journey) -> Markup:
    """A root's events on a time axis, one row per stage (in the order they first wrote)."""
    stages = journey.stages
    if not journey.events:
        return Markup("")
    row, left = 30, 140
    height = row * len(stages) + 28
    times = [e.event_time for e in journey.events]
    first, span = min(times), (max(times) - min(times)).total_seconds()
    body = []
    for r, (stage, events) in enumerate(stages):
        y = 18 + r * row
        body.append(
            f'<text class="stage" x="{left - 10}" y="{y + 4}" text-anchor="end">'
            f"{escape(stage[:20])}</text>"
            f'<line class="lane" x1="{left}" y1="{y}" x2="{WIDTH - 10}" y2="{y}"/>'
        )
        for e in events:
            offset = (e.event_time - first).total_seconds()
            x = left + (offset / span if span else 0.5) * (WIDTH - left - 20)
            kind = e.kind if e.kind in EVENT_KINDS else "other"
            dup = " dup" if e.duplicate else ""
            tip = f"{e.kind} at {iso(e.event_time)}" + (" (duplicate, not folded)" if dup else "")
            if e.reason:
                tip += f": {e.reason[:200]}"
            body.append(
                f'<circle class="k-{kind}{dup}" cx="{x:.1f}" cy="{y}" r="6">'
                f"<title>{escape(tip)}</title></circle>"
            )
    body.append(
        f'<text class="axis" x="{left}" y="{height - 4}">{escape(iso(first))}</text>'
        f'<text class="axis" x="{WIDTH - 10}" y="{height - 4}" text-anchor="end">'
        f"+{duration(span)}</text>"
    )
    return _svg(height, body, "events by stage over time")


def duration(seconds: float) -> str:
    """A short duration: 850ms, 12.5s, 3.2m, 1.5h.

    Example:
        >>> duration(0.85), duration(12.5), duration(192), duration(5400)
        ('850ms', '12.5s', '3.2m', '1.5h')
    """
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    if seconds < 3600:
        return f"{seconds / 60:.2g}m"
    return f"{seconds / 3600:.2g}h"
