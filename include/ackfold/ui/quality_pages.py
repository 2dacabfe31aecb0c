"""The Reliability UI's quality pages: the latest quality run and the runs before it (a
page and its JSON), and the run's Data Docs (`quality.docs_dir`), served sandboxed; the
files their pages share (`_static/`), by the signed links of the pages.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, and
# `ViewerDep` is local to `router`.
import re
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from ackfold.ledger.schema.values import iso
from ackfold.quality.docs_assets import STATIC
from ackfold.quality.report import QualityReport
from ackfold.ui.context import UiContext
from ackfold.ui.security import FRAME_NONE, LINK_DAYS, Viewer


def router(ctx: UiContext) -> APIRouter:
    """GET /quality, /api/quality, /quality/docs/{path} and /quality/docs/_static/{path}."""
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

    def published(path: str) -> Path:
        """The file `path` of the published site; 404 for anything else (`..`, a link
        out of it, a name the file system refuses)."""
        root = docs_dir.resolve()
        try:
            target = (root / (path or "index.html")).resolve()
            found = target.is_relative_to(root) and target.is_file()
        except (ValueError, OSError):  # a NUL byte, a name too long for the file system
            found = False
        if not found:
            raise HTTPException(404, f"no Data Docs page {path!r}: run `ackfold quality`")
        return target

    @routes.get(f"/quality/docs/{STATIC}/{{path:path}}", include_in_schema=False)
    def quality_docs_static(path: str, t: str | None = None) -> Response:
        # Asked by a sandboxed page, which sends no login cookie: the page's own link,
        # signed when a logged-in user was served the page, stands for the login.
        if not ctx.signer.valid(t):
            raise HTTPException(403, "this link to a Data Docs file is not valid (or no "
                                "longer): reload the page")  # fmt: skip
        return FileResponse(
            published(f"{STATIC}/{path}"),
            headers={"Cache-Control": f"private, max-age={LINK_DAYS * 86400 // 2}"},
        )

    @routes.get("/quality/docs/{path:path}", include_in_schema=False)
    def quality_docs(path: str, who: ViewerDep) -> Response:
        target = published(path)
        # GX's pages run scripts: sandboxed, they run in an origin of their own, with no
        # access to Airflow's (its cookies, its API). They open in a tab of their own:
        # nobody frames them.
        headers = {
            "Content-Security-Policy": "sandbox allow-scripts allow-popups; " + FRAME_NONE,
            "X-Frame-Options": "DENY",
        }
        if target.suffix != ".html":
            return FileResponse(target, headers=headers)
        # The page's links to its site's files carry a signature: the browser asks for
        # them without the login.
        html = target.read_text(encoding="utf-8")
        signed = _STATIC_LINK.sub(rf"\g<0>?t={ctx.signer.sign()}", html)
        return HTMLResponse(signed, headers=headers)

    return routes


# A link `docs_assets.linked_html` wrote: `../../_static/<file>`, up to its closing quote.
_STATIC_LINK = re.compile(rf'(?<=")(?:\.\./)*{STATIC}/[^"?#]+(?=")')
