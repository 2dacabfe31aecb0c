"""The Reliability UI's retract button: a dead letter's root page asks for a dry run (what
would go, per output, read here and now), its confirmation triggers the manual retract
DAG (`ackfold_manual_retract`) as the viewer, and the run's page follows the run as a
replay's does.

As the replay: login and the right to trigger the DAG (`Viewer.can_retract`), a CSRF
token and a same-origin POST, Airflow's configured address (`trigger.AirflowApi`). The
one field, `root_id`, is parsed into an int and checked as the DAG checks its conf
(`ackfold.effects.parse_retract_conf`): it never reaches SQL as text. The dry run is
`ackfold.effects.plan_retract` (reads only, no lease); the DAG plans again under the
ledger's lease before it deletes, and refuses what is no longer a dead letter's.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, and
# `ViewerDep` is local to `router`.
import logging
from dataclasses import replace
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from starlette.datastructures import FormData

from ackfold.effects import (
    RetractPlan,
    RetractRequest,
    conf_from_retract,
    parse_retract_conf,
    plan_retract,
)
from ackfold.ledger.schema.ids import format_id
from ackfold.ui.context import UiContext
from ackfold.ui.effects_view import SAMPLE_ROWS, VALUE_CHARS, masked_effects
from ackfold.ui.filters import FieldError, root_id_param
from ackfold.ui.manual_runs import follow, json_body, queued, trigger_as
from ackfold.ui.security import CSRF_FIELD, CSRF_HEADER, Viewer
from ackfold.ui.trigger import RETRACT_DAG, RunStatus, TriggeredRun

log = logging.getLogger(__name__)

# What a retract run's page and JSON show of its summary (`RetractSummary.as_dict()`):
# counts and reasons per output, never the roots' sample rows, which nobody has masked.
SUMMARY_KEYS: Final = (
    "retract_id",
    "dry_run",
    "requested_by",
    "selected",
    "to_delete",
    "deleted",
    "failed",
    "skipped",
    "problems",
)


def router(ctx: UiContext) -> APIRouter:
    """POST /retract (the dry run, to confirm), /retract/confirm (triggers the DAG) and
    /api/retract (either, in JSON); GET /retract/runs/{run_id} and
    /api/retract/runs/{run_id} (the run's live state)."""
    site, guard, airflow, redactor = ctx.site, ctx.guard, ctx.airflow, ctx.redactor
    routes = APIRouter()
    ViewerDep = Annotated[Viewer, Depends(ctx.viewer)]

    def may_retract(who: Viewer) -> None:
        """403 for a viewer whose role may not retract, 503 while Airflow's address is
        unknown: before any form is read or the ledger is."""
        who.check_retract()
        airflow.check()

    async def root_of(request: Request, who: Viewer) -> int:
        """The form's one root, once the viewer may retract and the form is theirs."""
        may_retract(who)
        data: FormData = await request.form()
        value = data.get(CSRF_FIELD)
        guard.check(request, who, value if isinstance(value, str) else None)
        return one_root(data.getlist("root_id"))

    def plan(who: Viewer, root_id: int) -> RetractPlan:
        """The dry run of retracting `root_id` (in a worker thread: it reads the outputs);
        `RetractRefused` (409) or `UnknownRoots` (404) say why not."""
        settings = ctx.settings
        if settings is None:
            raise HTTPException(503, "the UI has no settings to find the outputs with")
        request = RetractRequest(root_ids=(root_id,), dry_run=True, requested_by=who.name)
        chars = min(ctx.ui.payload_preview_chars, VALUE_CHARS)
        found = plan_retract(settings, request, sample=SAMPLE_ROWS if chars else 0)
        return replace(found, roots=tuple(masked_effects(redactor, r, chars) for r in found.roots))

    @routes.post("/retract", response_class=HTMLResponse)
    async def retract_dry_run_page(request: Request, who: ViewerDep) -> HTMLResponse:
        root_id = await root_of(request, who)
        planned = await run_in_threadpool(plan, who, root_id)
        return site.page(
            request,
            "retract_confirm.html",
            who,
            active="roots",
            root_id=root_id,
            plan=planned,
            previews=bool(ctx.ui.payload_preview_chars),
            back=f"{site.base(request)}/roots/{format_id(root_id)}",
        )

    async def trigger(who: Viewer, root_id: int) -> TriggeredRun:
        """Trigger the retract DAG for `root_id` as `who`. Refused here, before the run,
        if the root moved on since the dry run (a replay, a later attempt) or has nothing
        left to retract; the DAG checks again under the lease before it deletes."""
        planned = await run_in_threadpool(plan, who, root_id)
        if not planned.with_effects:
            raise FieldError("root_id", f"root {format_id(root_id)} has nothing to retract")
        checked = parse_retract_conf(
            {"root_ids": [format_id(root_id)], "dry_run": False}, apps=ctx.apps
        )
        run = await trigger_as(ctx, RETRACT_DAG, who, conf_from_retract(checked))
        log.info(
            "%s triggered %s run %s for root %s",
            who.name,
            RETRACT_DAG.dag_id,
            run.run_id,
            format_id(root_id),
        )
        return run

    @routes.post("/retract/confirm", response_class=HTMLResponse)
    async def retract_trigger_page(request: Request, who: ViewerDep) -> HTMLResponse:
        root_id = await root_of(request, who)
        run = await trigger(who, root_id)
        return run_page(request, who, queued(run, [format_id(root_id)], dry_run=False))

    def run_page(request: Request, who: Viewer, status: RunStatus) -> HTMLResponse:
        return site.page(request, "retract_run.html", who, active="roots", run=status)

    async def follow_run(who: Viewer, run_id: str) -> RunStatus:
        status = await follow(ctx, RETRACT_DAG, who, run_id)
        if status.summary is None:
            return status
        return replace(status, summary={k: status.summary.get(k) for k in SUMMARY_KEYS})

    @routes.get("/retract/runs/{run_id}", response_class=HTMLResponse)
    async def retract_run_page(request: Request, run_id: str, who: ViewerDep) -> HTMLResponse:
        return run_page(request, who, await follow_run(who, run_id))

    @routes.get("/api/retract/runs/{run_id}")
    async def retract_run_json(run_id: str, who: ViewerDep) -> dict[str, Any]:
        return (await follow_run(who, run_id)).to_json()

    @routes.post("/api/retract")
    async def retract_json(request: Request, who: ViewerDep) -> dict[str, Any]:
        """Body: {"root_id": "..."} and "dry_run" (default true: what would go, per
        output, masked; false: trigger the DAG); header X-CSRF-Token (GET /api/csrf)."""
        may_retract(who)
        guard.check(request, who, request.headers.get(CSRF_HEADER))
        body = json_body(await request.body())
        unknown = sorted(set(body) - {"root_id", "dry_run"})
        if unknown:
            raise FieldError(unknown[0], "not a retract field: give root_id and dry_run")
        dry_run = body.get("dry_run", True)
        if not isinstance(dry_run, bool):
            raise FieldError("dry_run", "must be true or false")
        root_id = one_root([body.get("root_id")])
        if dry_run:
            planned = await run_in_threadpool(plan, who, root_id)
            return {"dry_run": True, **plan_json(planned)}
        run = await trigger(who, root_id)
        return {"dry_run": False, "run_id": run.run_id, "state": run.state, "url": run.url}

    return routes


def one_root(named: list[Any]) -> int:
    """The one root id a retract request names (a form's `root_id` fields, a body's)."""
    if len(named) != 1 or not isinstance(named[0], str) or not named[0].strip():
        raise FieldError("root_id", "name exactly one dead-lettered root to retract, as a string")
    return root_id_param(named[0])


def plan_json(plan: RetractPlan) -> dict[str, Any]:
    """A dry run as JSON: what would go per output, and each output's rows (masked)."""
    return {
        "selected": plan.selected,
        "to_delete": plan.per_output(),
        "problems": plan.problems,
        "skipped": plan.skipped,
        "roots": [r.as_dict() for r in plan.roots],
    }
