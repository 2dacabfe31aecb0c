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
from ackfold.ledger.ids import format_id
from ackfold.ui.context import UiContext
from ackfold.ui.effects_view import SAMPLE_ROWS, VALUE_CHARS, masked_effects
from ackfold.ui.filters import FieldError, root_id_param
from ackfold.ui.security import CSRF_FIELD, Viewer
from ackfold.ui.trigger import RETRACT_DAG, RUN_ID, RunStatus, run_status, trigger_run

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
    """POST /retract (the dry run, to confirm), /retract/confirm (triggers the DAG); GET
    /retract/runs/{run_id} and /api/retract/runs/{run_id} (the run's live state)."""
    site, guard, airflow, redactor = ctx.site, ctx.guard, ctx.airflow, ctx.redactor
    routes = APIRouter()
    ViewerDep = Annotated[Viewer, Depends(ctx.viewer)]

    async def root_of(request: Request, who: Viewer) -> int:
        """The form's one root, once the viewer may retract and the form is theirs: 403
        for a viewer whose role may not, 503 while Airflow's address is unknown, before
        the ledger is read."""
        who.check_retract()
        airflow.check()
        data: FormData = await request.form()
        value = data.get(CSRF_FIELD)
        guard.check(request, who, value if isinstance(value, str) else None)
        named = data.getlist("root_id")
        if len(named) != 1 or not isinstance(named[0], str) or not named[0].strip():
            raise FieldError("root_id", "name exactly one dead-lettered root to retract")
        return root_id_param(named[0])

    def plan(who: Viewer, root_id: int) -> RetractPlan:
        """The dry run of retracting `root_id` (in a worker thread: it reads the outputs);
        `RetractRefused` (409) or `UnknownRoots` (404) say why not."""
        settings = ctx.settings
        if settings is None:
            raise HTTPException(503, "the UI has no settings to find the outputs with")
        request = RetractRequest(root_ids=(root_id,), dry_run=True, requested_by=who.name)
        found = plan_retract(settings, request, sample=SAMPLE_ROWS)
        chars = min(ctx.ui.payload_preview_chars, VALUE_CHARS)
        roots = tuple(masked_effects(redactor, r, chars) for r in found.roots)
        return RetractPlan(found.retract_id, found.request, found.selected, roots, found.skipped)

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

    @routes.post("/retract/confirm", response_class=HTMLResponse)
    async def retract_trigger_page(request: Request, who: ViewerDep) -> HTMLResponse:
        root_id = await root_of(request, who)
        # Refused here, before the run, if the root moved on since the dry run (a replay,
        # a later attempt); the DAG checks again under the lease before it deletes.
        planned = await run_in_threadpool(plan, who, root_id)
        if not planned.with_effects:
            raise FieldError("root_id", f"root {format_id(root_id)} has nothing to retract")
        checked = parse_retract_conf(
            {"root_ids": [format_id(root_id)], "dry_run": False}, apps=ctx.apps
        )
        if who.token is None:
            raise HTTPException(401, "no Airflow token to trigger the retract with: log in again")
        run = await trigger_run(
            airflow, RETRACT_DAG, who.token, conf_from_retract(checked), transport=ctx.transport
        )
        log.info(
            "%s triggered %s run %s for root %s",
            who.name,
            RETRACT_DAG.dag_id,
            run.run_id,
            format_id(root_id),
        )
        status = RunStatus(
            run_id=run.run_id,
            state=run.state or "queued",
            url=run.url,
            root_ids=(format_id(root_id),),
            dry_run=False,
            paused=run.paused,
        )
        return run_page(request, who, status)

    def run_page(request: Request, who: Viewer, status: RunStatus) -> HTMLResponse:
        return site.page(request, "retract_run.html", who, active="roots", run=status)

    async def follow(who: Viewer, run_id: str) -> RunStatus:
        if not RUN_ID.match(run_id):
            raise FieldError("run_id", "not an Airflow run id")
        airflow.check()
        if who.token is None:
            raise HTTPException(401, "no Airflow token to ask about the run with: log in again")
        status = await run_status(airflow, RETRACT_DAG, who.token, run_id, transport=ctx.transport)
        if status.summary is None:
            return status
        return replace(status, summary={k: status.summary.get(k) for k in SUMMARY_KEYS})

    @routes.get("/retract/runs/{run_id}", response_class=HTMLResponse)
    async def retract_run_page(request: Request, run_id: str, who: ViewerDep) -> HTMLResponse:
        return run_page(request, who, await follow(who, run_id))

    @routes.get("/api/retract/runs/{run_id}")
    async def retract_run_json(run_id: str, who: ViewerDep) -> dict[str, Any]:
        return (await follow(who, run_id)).to_json()

    return routes
