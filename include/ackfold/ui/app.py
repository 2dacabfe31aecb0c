"""The Reliability UI as a FastAPI app: server-rendered pages and their JSON twins.

`create_app` builds it without Airflow (tests pass their own `viewer` dependency); the
plugin (`plugins/ackfold_ui.py`) passes Airflow's and mounts it under `/ackfold`. Every
route depends on the viewer, so nothing answers an anonymous request: pages (GET or
POST) redirect it to Airflow's login, `/api/...` answers 401/403. Reads are sync routes
(FastAPI runs them in its thread pool); the replay trigger is async (see `trigger`).
Fail reasons and event reasons go through the same `Redactor` as the payload preview
(they can quote the record a stage choked on), in pages, charts and JSON alike. Pages may
be framed by Airflow's UI (same origin) only, other responses by nobody
(`security.FramingHeaders`). The replay is triggered at Airflow's configured address,
never one taken from the request (`trigger.AirflowApi`), and only for a viewer whose role
may trigger the DAG.

Routes (under the mount prefix):
    GET  /                      -> /overview
    GET  /overview              GET /api/overview          roots by status over time, latency
    GET  /roots                 GET /api/roots             the roots table (filter, sort, page)
    GET  /roots/{root_id}       GET /api/roots/{root_id}   one root's journey
    GET  /dead-letters          GET /api/dead-letters      the dead letters
    GET  /quality               GET /api/quality           the latest quality run; the runs before
    GET  /quality/docs/{path}   Data Docs of the latest quality run (`quality.docs_dir`)
    GET  /api/apps              GET /api/csrf              app names; a CSRF token for scripts
    POST /replay                the confirmation page for a selection or the current filter
    POST /replay/confirm        triggers `ackfold_manual_replay`, links to the run
    POST /api/replay            the same, in JSON
    GET  /static/{name}         the stylesheet and the small script
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, and
# `ViewerDep` is local to `create_app`.
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, replace
from importlib.resources import files
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from starlette.datastructures import FormData

from ackfold.config import Settings
from ackfold.ledger.parse import QueryError, parse_root_id
from ackfold.ledger.reader import RootNotFound
from ackfold.ledger.rows import Journey
from ackfold.ledger.sql import LedgerError, NoLedger
from ackfold.ledger.values import iso
from ackfold.quality.report import QualityReport
from ackfold.replay.params import (
    MANUAL_REPLAY_DAG_ID,
    ReplayParamsError,
    conf_from_request,
    parse_replay_conf,
)
from ackfold.replay.request import REPLAYABLE
from ackfold.ui import charts
from ackfold.ui.filters import DeadLetterFilter, FieldError, Params, RootFilter
from ackfold.ui.queries import DeadLetter, UiReader
from ackfold.ui.redact import (
    Preview,
    masked_journey,
    masked_state,
    masked_text,
    redactor_for,
)
from ackfold.ui.security import (
    CSRF_FIELD,
    CSRF_HEADER,
    FRAME_NONE,
    CsrfGuard,
    FramingHeaders,
    Viewer,
)
from ackfold.ui.selection import Selection, json_params, select_roots
from ackfold.ui.site import Site, login_path
from ackfold.ui.trigger import AirflowApi, TriggerError, trigger_manual_replay

log = logging.getLogger(__name__)

ViewerDependency = Callable[..., Awaitable[Viewer]]
_STATIC = {"ackfold.css": "text/css", "ackfold.js": "text/javascript"}


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
    ui = settings.ui
    warehouse = settings.table_root
    docs_dir = settings.quality.docs_dir
    assert docs_dir is not None  # Settings resolves it
    apps = tuple(settings.apps)
    guard = CsrfGuard(csrf_secret, allowed_origins)
    site = Site(guard, allowed_origins=allowed_origins)
    airflow = AirflowApi(base_url=airflow_url, loopback=loopback_url)
    redactor = redactor_for(ui)
    app = FastAPI(title="ackfold reliability", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(FramingHeaders)
    ViewerDep = Annotated[Viewer, Depends(viewer)]

    def reader() -> UiReader:
        return UiReader(warehouse)  # one per request: a fresh snapshot of the tables

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

    @app.exception_handler(TriggerError)
    async def trigger_error(request: Request, exc: TriggerError) -> Response:
        return site.failure(request, exc.status if exc.status >= 400 else 502, str(exc))

    @app.exception_handler(LedgerError)
    async def ledger_error(request: Request, exc: LedgerError) -> Response:
        if isinstance(exc, RootNotFound):
            return site.failure(request, 404, str(exc))
        if isinstance(exc, NoLedger):
            if site.is_api(request):
                return JSONResponse({"detail": str(exc), "no_ledger": True}, status_code=404)
            return site.page(request, "empty.html", None, message=str(exc))
        log.warning("ledger unreadable: %s", exc)
        return site.failure(request, 503, str(exc))

    def query(request: Request) -> Params:
        return Params({k: request.query_params.getlist(k) for k in request.query_params})

    # --- pages and their JSON ---------------------------------------------------------

    @app.get("/", include_in_schema=False)
    def home(request: Request, who: ViewerDep) -> RedirectResponse:
        return RedirectResponse(f"{site.base(request)}/overview", status_code=303)

    def overview_data(params: Params) -> dict[str, Any]:
        since, until = params.time("since"), params.time("until")
        if since and until and since >= until:
            raise FieldError("until", "must be later than since")
        r = reader()
        return {"apps": r.apps(), "overview": r.overview(params.text("app"), since, until)}

    @app.get("/overview", response_class=HTMLResponse)
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
        )

    @app.get("/api/overview")
    def overview_json(request: Request, who: ViewerDep) -> dict[str, Any]:
        data = overview_data(query(request))
        return {"apps": data["apps"], **data["overview"].to_json()}

    @app.get("/roots", response_class=HTMLResponse)
    def roots_page(request: Request, who: ViewerDep) -> HTMLResponse:
        f = RootFilter.parse(query(request), page_size=ui.page_size)
        r = reader()
        result = r.roots_page(f)
        result = replace(result, roots=[masked_state(redactor, root) for root in result.roots])
        return site.page(request, "roots.html", who, active="roots", apps=r.apps(), p=result, f=f)

    @app.get("/api/roots")
    def roots_json(request: Request, who: ViewerDep) -> dict[str, Any]:
        f = RootFilter.parse(query(request), page_size=ui.page_size)
        result = reader().roots_page(f)
        return replace(
            result, roots=[masked_state(redactor, root) for root in result.roots]
        ).to_json()

    # Fail and event reasons can quote the record a stage choked on: masked like payloads.
    def masked_letter(letter: DeadLetter) -> DeadLetter:
        return replace(letter, reason=masked_text(redactor, letter.reason) or "")

    def journey(root_id: str) -> tuple[Journey, Preview | None]:
        # Read past the cut, so that masking sees a secret the cut would split.
        r = reader()
        found = r.show_root(parse_root_id(root_id), preview_chars=ui.payload_preview_chars + 1024)
        found = masked_journey(redactor, found)
        source = found.source
        preview = None
        if source is not None and source.payload_preview is not None and ui.payload_preview_chars:
            preview = redactor.preview(
                source.payload_preview, ui.payload_preview_chars, source.payload_chars
            )
        return found, preview

    @app.get("/roots/{root_id}", response_class=HTMLResponse)
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
        )

    @app.get("/api/roots/{root_id}")
    def root_json(root_id: str, who: ViewerDep) -> dict[str, Any]:
        found, preview = journey(root_id)
        out = found.to_json()
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

    @app.get("/dead-letters", response_class=HTMLResponse)
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
        )

    @app.get("/api/dead-letters")
    def dead_letters_json(request: Request, who: ViewerDep) -> dict[str, Any]:
        f = DeadLetterFilter.parse(query(request), page_size=ui.page_size)
        letters = reader().dead_letters(f)
        return replace(letters, letters=[masked_letter(d) for d in letters.letters]).to_json()

    # --- quality ------------------------------------------------------------------------

    def quality_data() -> dict[str, Any]:
        r = reader()
        rows = r.quality_run()
        latest = QualityReport.from_rows(rows) if rows else None
        return {"latest": latest, "history": r.quality_history()}

    @app.get("/quality", response_class=HTMLResponse)
    def quality_page(request: Request, who: ViewerDep) -> HTMLResponse:
        data = quality_data()
        docs = (docs_dir / "index.html").is_file()
        return site.page(request, "quality.html", who, active="quality", docs=docs, **data)

    @app.get("/api/quality")
    def quality_json(who: ViewerDep) -> dict[str, Any]:
        data = quality_data()
        latest = data["latest"]
        return {
            "latest": latest.as_dict() | {"results": [asdict(r) for r in latest.results]}
            if latest
            else None,
            "history": [{**h, "run_at": iso(h["run_at"])} for h in data["history"]],
        }

    @app.get("/quality/docs/{path:path}", include_in_schema=False)
    def quality_docs(path: str, who: ViewerDep) -> Response:
        root = docs_dir.resolve()
        try:
            target = (root / (path or "index.html")).resolve()
            # Only files inside the published site: no `..`, no symlink out of it.
            found = target.is_relative_to(root) and target.is_file()
        except (ValueError, OSError):  # a NUL byte, a name too long for the file system
            found = False
        if not found:
            raise HTTPException(404, f"no Data Docs page {path!r}: run `ackfold quality`")
        # GX's pages load scripts from CDNs: sandboxed, they run in an origin of their
        # own, with no access to Airflow's (its cookies, its API). They open in a tab of
        # their own: nobody frames them.
        headers = {
            "Content-Security-Policy": "sandbox allow-scripts allow-popups; " + FRAME_NONE,
            "X-Frame-Options": "DENY",
        }
        return FileResponse(target, headers=headers)

    @app.get("/api/apps")
    def apps_json(who: ViewerDep) -> dict[str, Any]:
        return {"apps": reader().apps(), "configured": list(apps)}

    @app.get("/api/csrf")
    def csrf_json(who: ViewerDep) -> dict[str, str]:
        return {"csrf_token": guard.token(who), "header": CSRF_HEADER}

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str, who: ViewerDep) -> Response:
        if name not in _STATIC:
            raise HTTPException(404, f"no static file {name}")
        body = files("ackfold.ui").joinpath("templates", name).read_bytes()
        return Response(body, media_type=_STATIC[name])

    # --- replay -----------------------------------------------------------------------

    def select(params: Params) -> Selection:
        """The roots a replay request names (in a worker thread: it reads the ledger)."""
        return select_roots(reader(), params, ui)

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
            "root_ids": [str(r) for r in root_ids],
            "statuses": list(REPLAYABLE),
            "dry_run": dry_run,
        }
        # The DAG records who asked: Airflow's triggering user, i.e. `who`.
        checked = parse_replay_conf(conf, apps=apps)
        if who.token is None:
            raise HTTPException(401, "no Airflow token to trigger the replay with: log in again")
        run = await trigger_manual_replay(
            airflow, who.token, conf_from_request(checked), transport=transport
        )
        log.info(
            "%s triggered %s run %s for %d roots (dry run: %s)",
            who.name,
            MANUAL_REPLAY_DAG_ID,
            run.run_id,
            len(root_ids),
            dry_run,
        )
        return run

    @app.post("/replay", response_class=HTMLResponse)
    async def replay_confirm_page(request: Request, who: ViewerDep) -> HTMLResponse:
        params = await form(request, who)
        chosen = await run_in_threadpool(select, params)
        back = site.back_link(request)
        return site.page(request, "confirm.html", who, active="roots", sel=chosen, back=back)

    @app.post("/replay/confirm", response_class=HTMLResponse)
    async def replay_trigger_page(request: Request, who: ViewerDep) -> HTMLResponse:
        params = await form(request, who)
        chosen = await run_in_threadpool(select, params)
        if not chosen.root_ids:
            raise FieldError("root_id", "none of the selected roots can be replayed")
        run = await trigger(who, chosen.root_ids, params.given("dry_run"))
        return site.page(
            request,
            "triggered.html",
            who,
            active="roots",
            run=run,
            count=len(chosen.root_ids),
            dry_run=params.given("dry_run"),
        )

    @app.post("/api/replay")
    async def replay_json(request: Request, who: ViewerDep) -> dict[str, Any]:
        """Body: {"root_ids": ["..."]} or {"filter": {query params}}, and "dry_run"
        (default true); header X-CSRF-Token (GET /api/csrf)."""
        may_replay(who)
        guard.check(request, who, request.headers.get(CSRF_HEADER))
        try:
            body = await request.json()
        except json.JSONDecodeError:
            raise FieldError("body", "not JSON") from None
        if not isinstance(body, dict):
            raise FieldError("body", "must be a JSON object")
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

    return app


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
