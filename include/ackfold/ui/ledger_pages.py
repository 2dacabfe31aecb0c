"""The Reliability UI's pages over the ledger, and their JSON twins: the overview, the
roots table, one root's journey, the dead letters, the app names.

Fail reasons and event reasons go through the same `Redactor` as the payload preview
(they can quote the record a stage choked on), in pages, charts and JSON alike.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, and
# `ViewerDep` is local to `router`.
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from ackfold.effects import RootEffects
from ackfold.ledger.reading.recovery import read_recovery
from ackfold.ledger.reading.rows import Attempt, Journey
from ackfold.replay.request import REPLAYABLE
from ackfold.ui import charts
from ackfold.ui.app_pages import app_states
from ackfold.ui.context import UiContext, query
from ackfold.ui.effects_view import dead_letter_flags, flags_json, root_effects
from ackfold.ui.filters import DeadLetterFilter, FieldError, Params, RootFilter, root_id_param
from ackfold.ui.redact import Preview, masked_journey, masked_state, masked_text
from ackfold.ui.results import DeadLetter
from ackfold.ui.security import Viewer


def router(ctx: UiContext) -> APIRouter:
    """GET / (to the overview), /overview, /roots, /roots/{root_id}, /dead-letters, and
    their JSON under /api/; GET /api/apps."""
    ui, site, redactor, reader = ctx.ui, ctx.site, ctx.redactor, ctx.reader
    routes = APIRouter()
    ViewerDep = Annotated[Viewer, Depends(ctx.viewer)]

    @routes.get("/", include_in_schema=False)
    def home(request: Request, who: ViewerDep) -> RedirectResponse:
        return RedirectResponse(f"{site.base(request)}/overview", status_code=303)

    def overview_data(params: Params) -> dict[str, Any]:
        since, until = params.time("since"), params.time("until")
        if since and until and since >= until:
            raise FieldError("until", "must be later than since")
        r = reader()
        app = params.text("app")
        # The overview first: over the whole history it has the apps already.
        view = r.overview(app, since, until)
        out: dict[str, Any] = {"apps": r.apps(), "overview": view}
        # Time to detect and to recover need each app's timeout: the settings' policies.
        settings = ctx.settings
        out["recovery"] = (
            read_recovery(r, settings, app=app, since=since, until=until) if settings else None
        )
        return out

    @routes.get("/overview", response_class=HTMLResponse)
    def overview_page(request: Request, who: ViewerDep) -> HTMLResponse:
        params = query(request)
        data = overview_data(params)
        view = data["overview"]
        return site.page(
            request,
            "overview.html",
            who,
            active="overview",
            apps=data["apps"],
            o=view,
            since=params.text("since") or "",
            until=params.text("until") or "",
            status_chart=charts.status_bars(view.buckets, view.bucket_seconds),
            latency_chart=charts.latency_lines(view.buckets, view.bucket_seconds),
            duration=charts.duration,
            recovery=data["recovery"],
            app_states=app_states(ctx, data["apps"]),
        )

    @routes.get("/api/overview")
    def overview_json(request: Request, who: ViewerDep) -> dict[str, Any]:
        data = overview_data(query(request))
        recovery = data["recovery"].to_json() if data["recovery"] else None
        states = app_states(ctx, data["apps"])
        return {
            "apps": data["apps"],
            **data["overview"].to_json(),
            "recovery": recovery,
            "app_states": states,
        }

    @routes.get("/roots", response_class=HTMLResponse)
    def roots_page(request: Request, who: ViewerDep) -> HTMLResponse:
        f = RootFilter.parse(query(request), page_size=ui.page_size)
        r = reader()
        result = r.roots_page(f)
        result = replace(result, roots=[masked_state(redactor, root) for root in result.roots])
        # How many of the matches "Replay all matching" would send: all of them when the
        # filter names replayable statuses only (no query), else counted by status.
        replayable = result.total
        if who.can_replay and result.total and not set(f.statuses) <= set(REPLAYABLE):
            counts = r.count_by_status(f)
            replayable = sum(n for name, n in counts.items() if name in REPLAYABLE)
        return site.page(
            request,
            "roots.html",
            who,
            active="roots",
            apps=r.apps(),
            p=result,
            f=f,
            replayable=replayable,
            REPLAYABLE=REPLAYABLE,
            effects=dead_letter_flags(ctx.settings, result.roots),
        )

    @routes.get("/api/roots")
    def roots_json(request: Request, who: ViewerDep) -> dict[str, Any]:
        f = RootFilter.parse(query(request), page_size=ui.page_size)
        result = reader().roots_page(f)
        out = replace(result, roots=[masked_state(redactor, root) for root in result.roots])
        return {**out.to_json(), "effects": flags_json(dead_letter_flags(ctx.settings, out.roots))}

    # Fail and event reasons can quote the record a stage choked on: masked like payloads.
    def masked_letter(letter: DeadLetter) -> DeadLetter:
        return replace(letter, reason=masked_text(redactor, letter.reason) or "")

    def journey(root_id: str) -> tuple[Journey, Preview | None]:
        # Read past the cut, so that masking sees a secret the cut would split.
        r = reader()
        found = r.show_root(root_id_param(root_id), preview_chars=ui.payload_preview_chars + 1024)
        found = masked_journey(redactor, found)
        source = found.source
        preview = None
        if source is not None and source.payload_preview is not None and ui.payload_preview_chars:
            preview = redactor.preview(
                source.payload_preview, ui.payload_preview_chars, source.payload_chars
            )
        return found, preview

    @routes.get("/roots/{root_id}", response_class=HTMLResponse)
    def root_page(request: Request, root_id: str, who: ViewerDep) -> HTMLResponse:
        found, preview = journey(root_id)
        return site.page(
            request,
            "root.html",
            who,
            active="roots",
            j=found,
            s=found.state,
            preview=preview,
            timeline=charts.timeline(found),
            replayable=found.state.status in REPLAYABLE,
            outcome=latest_attempt(found),
            effects=effects_of(found),
            previews=bool(ui.payload_preview_chars),
        )

    def effects_of(found: Journey) -> RootEffects | None:
        return root_effects(
            ctx.settings, redactor, found.state, value_chars=ui.payload_preview_chars
        )

    @routes.get("/api/roots/{root_id}")
    def root_json(root_id: str, who: ViewerDep) -> dict[str, Any]:
        found, preview = journey(root_id)
        effects = effects_of(found)
        out = found.to_json()
        out["effects"] = effects.as_dict()["outputs"] if effects else []
        if out["source"] is not None:
            for key in ("payload_preview", "payload_chars", "payload_truncated"):
                out["source"].pop(key)
            out["source"]["payload"] = (
                {
                    "preview": preview.text,
                    "chars": preview.chars,
                    "truncated": preview.truncated,
                    "masked": preview.masked,
                }
                if preview
                else None
            )
        return out

    @routes.get("/dead-letters", response_class=HTMLResponse)
    def dead_letters_page(request: Request, who: ViewerDep) -> HTMLResponse:
        f = DeadLetterFilter.parse(query(request), page_size=ui.page_size)
        r = reader()
        letters = r.dead_letters(f)
        return site.page(
            request,
            "dead_letters.html",
            who,
            active="dead-letters",
            apps=r.apps(),
            p=replace(letters, letters=[masked_letter(d) for d in letters.letters]),
            f=f,
            effects=dead_letter_flags(ctx.settings, letters.letters),
        )

    @routes.get("/api/dead-letters")
    def dead_letters_json(request: Request, who: ViewerDep) -> dict[str, Any]:
        f = DeadLetterFilter.parse(query(request), page_size=ui.page_size)
        letters = reader().dead_letters(f)
        out = replace(letters, letters=[masked_letter(d) for d in letters.letters]).to_json()
        return {**out, "effects": flags_json(dead_letter_flags(ctx.settings, letters.letters))}

    @routes.get("/api/apps")
    def apps_json(who: ViewerDep) -> dict[str, Any]:
        return {"apps": reader().apps(), "configured": list(ctx.apps)}

    return routes


def latest_attempt(j: Journey) -> Attempt | None:
    """The newest attempt of a root's chain: the root's outcome, when it was replayed
    (None for a root never replayed, whose own status says it all)."""
    if len(j.attempts) < 2:
        return None
    return max(j.attempts, key=lambda a: a.attempt)
