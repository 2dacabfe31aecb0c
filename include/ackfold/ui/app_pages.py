"""The app pages: is an app alive (its heartbeat, `ackfold.ledger.reading.progress`), its rates over
time, its source lag, and its roots by status.

GET /apps/{app} and /api/apps/{app}. An app that writes no heartbeat shows "no heartbeat".
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations.
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup, escape

from ackfold.alerts.rules import heartbeat_limit
from ackfold.config.values import APP_NAME
from ackfold.ledger.errors import NoLedger
from ackfold.ledger.reading.progress import DEFAULT_STALL_AFTER, Beat, Liveness, liveness
from ackfold.ledger.reading.sql import sql_str
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ROOT_STATE
from ackfold.ui.context import UiContext
from ackfold.ui.security import Viewer

_WIDTH, _HEIGHT, _PAD = 640, 160, 28


def router(ctx: UiContext) -> APIRouter:
    """GET /apps/{app} and /api/apps/{app}."""
    site = ctx.site
    routes = APIRouter()
    ViewerDep = Annotated[Viewer, Depends(ctx.viewer)]

    def app_data(app: str) -> tuple[Liveness, dict[str, int]]:
        if not APP_NAME.match(app):
            raise HTTPException(400, f"app {app[:40]!r} is not an app name")
        reader = ctx.reader()
        limit = heartbeat_limit(ctx.settings.app(app)) if ctx.settings else None
        alive = liveness(reader, app, datetime.now(UTC), limit or DEFAULT_STALL_AFTER)
        try:
            rows = reader.query(
                ROOT_STATE, ["status", "count(*) AS n"], [f"app = {sql_str(app)}"], group="status"
            )
        except NoLedger:
            rows = []
        counts = {s: 0 for s in status.ALL} | {str(r["status"]): int(r["n"]) for r in rows}
        return alive, counts

    @routes.get("/apps/{app}", response_class=HTMLResponse)
    def app_page(request: Request, app: str, who: ViewerDep) -> HTMLResponse:
        alive, counts = app_data(app)
        return site.page(
            request,
            "app.html",
            who,
            active="overview",
            a=alive,
            counts=counts,
            rates=rates_chart(alive.beats),
        )

    @routes.get("/api/apps/{app}")
    def app_json(app: str, who: ViewerDep) -> dict[str, Any]:
        alive, counts = app_data(app)
        return {**alive.to_json(), "roots_by_status": counts}

    return routes


def app_states(ctx: UiContext, apps: list[str]) -> dict[str, str]:
    """Each app's state by its heartbeat (alive, stalled, no heartbeat), for the Overview."""
    reader, now = ctx.reader(), datetime.now(UTC)
    out = {}
    for app in apps:
        limit = heartbeat_limit(ctx.settings.app(app)) if ctx.settings else None
        out[app] = liveness(reader, app, now, limit or DEFAULT_STALL_AFTER).state
    return out


def rates_chart(beats: list[Beat]) -> Markup:
    """Input and processed rows per second over time, one line each (an inline SVG)."""
    points = [b for b in beats if b.input_rate is not None or b.processed_rate is not None]
    if len(points) < 2:
        return Markup('<p class="muted" id="rates-none">Not enough batches for a chart yet.</p>')
    start, end = points[0].at.timestamp(), points[-1].at.timestamp()
    top = max(max(b.input_rate or 0.0, b.processed_rate or 0.0) for b in points) or 1.0

    def x(beat: Beat) -> float:
        return _PAD + (beat.at.timestamp() - start) / max(end - start, 1e-9) * (_WIDTH - 2 * _PAD)

    def y(value: float) -> float:
        return _HEIGHT - _PAD - value / top * (_HEIGHT - 2 * _PAD)

    lines = []
    for name, css in (("input", "l-p50"), ("processed", "l-p99")):
        values = [(b, b.input_rate if name == "input" else b.processed_rate) for b in points]
        xy = " ".join(f"{x(b):.1f},{y(v):.1f}" for b, v in values if v is not None)
        lines.append(f'<polyline class="{css}" data-series="{name}" points="{xy}"/>')
    label = escape(f"rows per second, up to {top:.1f}")
    return Markup(  # noqa: S704 - numbers and an escaped label only
        f'<svg class="chart" id="rates-chart" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        f'aria-label="{label}"><text x="{_PAD}" y="14">{label}</text>{"".join(lines)}</svg>'
        '<div class="legend"><span><i class="l-p50"></i>input</span>'
        '<span><i class="l-p99"></i>processed</span></div>'
    )
