"""The Reliability UI's quality pages: the latest quality run and the runs before it (a
page and its JSON), and the run's Data Docs (`quality.docs_dir`), served sandboxed.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, and
# `ViewerDep` is local to `router`.
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from ackfold.ledger.values import iso
from ackfold.quality.report import QualityReport
from ackfold.ui.context import UiContext
from ackfold.ui.security import FRAME_NONE, Viewer


def router(ctx: UiContext) -> APIRouter:
    """GET /quality, /api/quality and /quality/docs/{path}."""
    site, docs_dir = ctx.site, ctx.docs_dir
    routes = APIRouter()
    ViewerDep = Annotated[Viewer, Depends(ctx.viewer)]

    def quality_data() -> dict[str, Any]:
        r = ctx.reader()
        rows = r.quality_run()
        latest = QualityReport.from_rows(rows) if rows else None
        return {"latest": latest, "history": r.quality_history()}

    @routes.get("/quality", response_class=HTMLResponse)
    def quality_page(request: Request, who: ViewerDep) -> HTMLResponse:
        data = quality_data()
        docs = (docs_dir / "index.html").is_file()
        return site.page(request, "quality.html", who, active="quality", docs=docs, **data)

    @routes.get("/api/quality")
    def quality_json(who: ViewerDep) -> dict[str, Any]:
        data = quality_data()
        latest = data["latest"]
        return {
            "latest": latest.as_dict() | {"results": [asdict(r) for r in latest.results]}
            if latest
            else None,
            "history": [{**h, "run_at": iso(h["run_at"])} for h in data["history"]],
        }

    @routes.get("/quality/docs/{path:path}", include_in_schema=False)
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

    return routes
