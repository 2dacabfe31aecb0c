"""The Reliability UI as a FastAPI app: server-rendered pages and their JSON twins.

`create_app` builds it without Airflow (tests pass their own `viewer` dependency); the
plugin (`ackfold.airflow.plugin`) passes Airflow's and mounts it under `/ackfold`. Every
route depends on the viewer, so nothing answers an anonymous request: pages (GET or
POST) redirect it to Airflow's login, `/api/...` answers 401/403. Reads are sync routes
(FastAPI runs them in its thread pool); the replay trigger is async. Reasons are masked
like payloads. Pages may be framed by Airflow's UI (same origin) only, other responses by
nobody (`security.FramingHeaders`).

The routes come in groups, each a router over the app's `context.UiContext`:
`ledger_pages`, `quality_pages`, `app_pages`, and `replay_pages` and `retract_pages`
(triggered at Airflow's configured address, only for a viewer whose role may trigger the
DAG). This module builds the app:
the context, the error pages, the static files.

Routes (under the mount prefix):
    GET  /                      -> /overview
    GET  /overview              GET /api/overview          roots by status over time, latency
    GET  /roots                 GET /api/roots             the roots table (filter, sort, page)
    GET  /roots/{root_id}       GET /api/roots/{root_id}   one root's journey
    GET  /dead-letters          GET /api/dead-letters      the dead letters
    GET  /quality               GET /api/quality           the latest quality run; the runs before
    GET  /quality/docs/{path}   Data Docs of the latest quality run (`quality.docs_dir`)
    GET  /api/apps              GET /api/csrf              app names; a CSRF token for scripts
    GET  /apps/{app}            GET /api/apps/{app}        alive or stalled, rates, lag, roots
    POST /replay                the confirmation page for a selection or the current filter
    POST /replay/confirm        triggers `ackfold_manual_replay`, links to the run
    POST /api/replay            the same, in JSON
    GET  /replay/runs/{run_id}  GET /api/replay/runs/{run_id}  the replay run's live state
    POST /retract               a dead letter's retract: the dry run, to confirm
    POST /retract/confirm       triggers `ackfold_manual_retract`, follows the run
    POST /api/retract           either, in JSON (`dry_run`, default true)
    GET  /retract/runs/{run_id} GET /api/retract/runs/{run_id} the retract run's live state
    GET  /static/{name}         the stylesheet and the small script
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, and
# `ViewerDep` is local to `create_app`.
import logging
import re
from collections.abc import Callable, Sequence
from importlib.resources import files
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from ackfold.config import Settings
from ackfold.effects import EffectsError, RetractParamsError, RetractRefused, UnknownRoots
from ackfold.ledger.errors import LedgerError, NoLedger, RootNotFound
from ackfold.ledger.reading.parse import QueryError
from ackfold.replay.params import ReplayParamsError
from ackfold.ui import app_pages, ledger_pages, quality_pages, replay_pages, retract_pages
from ackfold.ui.context import UiContext, ViewerDependency
from ackfold.ui.filters import FieldError
from ackfold.ui.redact import redactor_for
from ackfold.ui.security import CsrfGuard, FramingHeaders, LinkSigner, Viewer
from ackfold.ui.site import Site, login_path
from ackfold.ui.trigger import AirflowApi, TriggerError

log = logging.getLogger(__name__)

_STATIC = {"ackfold.css": "text/css", "ackfold.js": "text/javascript"}


def without_paths(message: str, warehouse: str) -> str:
    """`message` with the warehouse's location, and any other absolute path, left out:
    a ledger error as the UI shows it.

    Example:
        >>> without_paths("no root 7 in /srv/wh/root_state (not reconciled yet)", "/srv/wh")
        'no root 7 in table root_state (not reconciled yet)'
        >>> without_paths("no ledger at file:///srv/wh: none", "file:///srv/wh")
        'no ledger at the warehouse: none'
    """
    base = re.escape(warehouse.rstrip("/"))
    message = re.sub(base + r"/+([\w.-]+)\S*", r"table \1", message)
    message = re.sub(base, "the warehouse", message)
    return re.sub(r"(?:\b[a-z][a-z0-9+.-]*://)?(?<![\w.])/[^\s'\"()<>]+", "(a path)", message)


def create_app(
    settings: Settings,
    *,
    viewer: ViewerDependency,
    csrf_secret: bytes,
    login_url: Callable[[str], str] = login_path,
    airflow_url: str | None = None,
    loopback_url: str | None = None,
    allowed_origins: Sequence[str] = (),
    transport: Any = None,
) -> FastAPI:
    """The UI over the ledger of `settings`. `viewer` resolves the logged-in user or
    raises 401/403; `airflow_url` is Airflow's `[api] base_url`, for the REST call and the
    run link; without it, `loopback_url` (the api-server's own address on 127.0.0.1) takes
    the call; with neither, replays are refused, naming the setting. `allowed_origins`:
    origins a browser may post from besides the request's host (behind a proxy, that of
    `[api] base_url`). `transport` is for tests (an `httpx.AsyncBaseTransport` standing in
    for Airflow)."""
    docs_dir = settings.quality.docs_dir
    assert docs_dir is not None  # Settings resolves it
    guard = CsrfGuard(csrf_secret, allowed_origins)
    site = Site(guard, allowed_origins=allowed_origins)
    ctx = UiContext(
        ui=settings.ui,
        warehouse=settings.table_root,
        docs_dir=docs_dir,
        apps=tuple(settings.apps),
        guard=guard,
        signer=LinkSigner(csrf_secret),
        site=site,
        airflow=AirflowApi(base_url=airflow_url, loopback=loopback_url),
        redactor=redactor_for(settings.ui),
        viewer=viewer,
        transport=transport,
        settings=settings,
    )
    app = FastAPI(title="ackfold reliability", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(FramingHeaders)
    ViewerDep = Annotated[Viewer, Depends(viewer)]

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 401 and not site.is_api(request):
            # A page, or a form posted with an expired login: log in, then come back to
            # the page (for a POST, the page the form was on: a POST cannot be replayed).
            back = str(request.url)
            if request.method != "GET":
                back = f"{request.url.scheme}://{request.url.netloc}{site.back_link(request)}"
            return RedirectResponse(login_url(back), status_code=303)
        return site.failure(request, exc.status_code, str(exc.detail))

    @app.exception_handler(QueryError)
    async def bad_request(request: Request, exc: QueryError) -> Response:
        name = exc.field if isinstance(exc, FieldError) else None
        return site.failure(request, 400, str(exc), field=name)

    @app.exception_handler(ReplayParamsError)
    async def bad_replay(request: Request, exc: ReplayParamsError) -> Response:
        return site.failure(request, 400, str(exc), problems=exc.problems)

    @app.exception_handler(EffectsError)
    async def effects_error(request: Request, exc: EffectsError) -> Response:
        message = without_paths(str(exc), settings.table_root)
        if isinstance(exc, UnknownRoots):
            return site.failure(request, 404, message)
        if isinstance(exc, RetractParamsError):
            return site.failure(request, 400, message, problems=exc.problems)
        if isinstance(exc, RetractRefused):  # not a dead letter's (any more): nothing deleted
            return site.failure(request, 409, message)
        log.warning("effects: %s", exc)
        return site.failure(request, 409, message)

    @app.exception_handler(TriggerError)
    async def trigger_error(request: Request, exc: TriggerError) -> Response:
        return site.failure(request, exc.status if exc.status >= 400 else 502, str(exc))

    @app.exception_handler(LedgerError)
    async def ledger_error(request: Request, exc: LedgerError) -> Response:
        # The server log keeps the paths; the user is told what, not where on disk.
        message = without_paths(str(exc), settings.table_root)
        if isinstance(exc, RootNotFound):
            return site.failure(request, 404, message)
        if isinstance(exc, NoLedger):
            if site.is_api(request):
                return JSONResponse({"detail": message, "no_ledger": True}, status_code=404)
            return site.page(request, "empty.html", None, message=message)
        log.warning("ledger unreadable: %s", exc)
        return site.failure(request, 503, message)

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str, who: ViewerDep) -> Response:
        if name not in _STATIC:
            raise HTTPException(404, f"no static file {name}")
        body = files("ackfold.ui").joinpath("templates", name).read_bytes()
        # The same for every user: this browser may keep them a while (pages may not).
        headers = {"Cache-Control": "private, max-age=300"}
        return Response(body, media_type=_STATIC[name], headers=headers)

    app.include_router(ledger_pages.router(ctx))
    app.include_router(quality_pages.router(ctx))
    app.include_router(replay_pages.router(ctx))
    app.include_router(retract_pages.router(ctx))
    app.include_router(app_pages.router(ctx))
    return app
