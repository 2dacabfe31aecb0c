"""The Reliability UI's replay button: the confirmation page for a selection or the
current filter, the trigger (a page, or JSON for scripts) and the CSRF token scripts send.

The replay is triggered at Airflow's configured address, never one taken from the request
(`trigger.AirflowApi`), as the viewer, and only for a viewer whose role may trigger the
DAG. The routes are async: the trigger awaits Airflow; reading the ledger for the
selection runs in FastAPI's thread pool.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, and
# `ViewerDep` is local to `router`.
import logging
from typing import Annotated, Any, Final
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from starlette.datastructures import FormData

from ackfold.ledger.schema.ids import format_id
from ackfold.replay.params import MANUAL_REPLAY_DAG_ID, conf_from_request, parse_replay_conf
from ackfold.replay.request import REPLAYABLE
from ackfold.ui.context import UiContext
from ackfold.ui.filters import MAX_ROOT_IDS, FieldError, Params
from ackfold.ui.manual_runs import follow, json_body, queued, trigger_as
from ackfold.ui.security import CSRF_FIELD, CSRF_HEADER, Viewer
from ackfold.ui.selection import Selection, json_params, select_roots
from ackfold.ui.trigger import REPLAY_DAG, RunStatus

log = logging.getLogger(__name__)

# The roots a run's page links to by name (the rest: one link to all of them).
SHOWN_ROOTS: Final = 20


def router(ctx: UiContext) -> APIRouter:
    """GET /api/csrf; POST /replay (confirm), /replay/confirm (trigger) and /api/replay;
    GET /replay/runs/{run_id} and /api/replay/runs/{run_id} (the run's live state)."""
    site, guard, airflow = ctx.site, ctx.guard, ctx.airflow
    routes = APIRouter()
    ViewerDep = Annotated[Viewer, Depends(ctx.viewer)]

    @routes.get("/api/csrf")
    def csrf_json(who: ViewerDep) -> dict[str, str]:
        return {"csrf_token": guard.token(who), "header": CSRF_HEADER}

    def select(params: Params) -> Selection:
        """The roots a replay request names (in a worker thread: it reads the ledger)."""
        return select_roots(ctx.reader(), params, ctx.ui)

    def may_replay(who: Viewer) -> None:
        """403 for a viewer whose role may not replay; 503 while Airflow's address is
        unknown: before any form is shown or any roots are read."""
        who.check_replay()
        airflow.check()

    async def form(request: Request, who: Viewer) -> Params:
        may_replay(who)
        data: FormData = await request.form()
        guard.check(request, who, _text(data.get(CSRF_FIELD)))
        return Params({k: [_text(v) for v in data.getlist(k)] for k in data})

    async def trigger(who: Viewer, root_ids: list[int], dry_run: bool) -> Any:
        conf = {
            "root_ids": [format_id(r) for r in root_ids],
            "statuses": list(REPLAYABLE),
            "dry_run": dry_run,
        }
        checked = parse_replay_conf(conf, apps=ctx.apps)
        run = await trigger_as(ctx, REPLAY_DAG, who, conf_from_request(checked))
        log.info(
            "%s triggered %s run %s for %d roots (dry run: %s)",
            who.name,
            MANUAL_REPLAY_DAG_ID,
            run.run_id,
            len(root_ids),
            dry_run,
        )
        return run

    @routes.post("/replay", response_class=HTMLResponse)
    async def replay_confirm_page(request: Request, who: ViewerDep) -> HTMLResponse:
        params = await form(request, who)
        chosen = await run_in_threadpool(select, params)
        back = site.back_link(request)
        return site.page(request, "confirm.html", who, active="roots", sel=chosen, back=back)

    @routes.post("/replay/confirm", response_class=HTMLResponse)
    async def replay_trigger_page(request: Request, who: ViewerDep) -> HTMLResponse:
        params = await form(request, who)
        chosen = await run_in_threadpool(select, params)
        if not chosen.root_ids:
            raise FieldError("root_id", "none of the selected roots can be replayed")
        dry_run = params.given("dry_run")
        run = await trigger(who, chosen.root_ids, dry_run)
        status = queued(run, [format_id(r) for r in chosen.root_ids], dry_run)
        return run_page(request, who, status)

    def run_page(request: Request, who: Viewer, status: RunStatus) -> HTMLResponse:
        roots_query = urlencode([("root_id", r) for r in status.root_ids[:MAX_ROOT_IDS]])
        return site.page(
            request,
            "triggered.html",
            who,
            active="roots",
            run=status,
            shown_roots=SHOWN_ROOTS,
            roots_query=roots_query,
        )

    @routes.get("/replay/runs/{run_id}", response_class=HTMLResponse)
    async def run_state_page(request: Request, run_id: str, who: ViewerDep) -> HTMLResponse:
        return run_page(request, who, await follow(ctx, REPLAY_DAG, who, run_id))

    @routes.get("/api/replay/runs/{run_id}")
    async def run_state_json(run_id: str, who: ViewerDep) -> dict[str, Any]:
        return (await follow(ctx, REPLAY_DAG, who, run_id)).to_json()

    @routes.post("/api/replay")
    async def replay_json(request: Request, who: ViewerDep) -> dict[str, Any]:
        """Body: {"root_ids": ["..."]} or {"filter": {query params}}, and "dry_run"
        (default true); header X-CSRF-Token (GET /api/csrf)."""
        may_replay(who)
        guard.check(request, who, request.headers.get(CSRF_HEADER))
        body = json_body(await request.body())
        dry_run = body.get("dry_run", True)
        if not isinstance(dry_run, bool):
            raise FieldError("dry_run", "must be true or false")
        chosen = await run_in_threadpool(select, json_params(body))
        if not chosen.root_ids:
            raise FieldError("root_ids", "none of the selected roots can be replayed")
        run = await trigger(who, chosen.root_ids, dry_run)
        return {
            "run_id": run.run_id,
            "state": run.state,
            "url": run.url,
            "dry_run": dry_run,
            "selection": chosen.to_json(),
        }

    return routes


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
