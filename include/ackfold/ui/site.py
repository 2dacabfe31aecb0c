"""What every page of the Reliability UI shares: the templates and their globals, the
mount prefix, the way back after a form, and the error page (HTML for pages, JSON under
`/api/`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode, urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from ackfold.ledger.reading.rows import span
from ackfold.ledger.schema import status
from ackfold.ledger.schema.ids import format_id
from ackfold.ledger.schema.values import hex64, iso
from ackfold.ui.filters import SORTABLE
from ackfold.ui.security import REPLAY_ROLE, RETRACT_ROLE, CsrfGuard, Viewer

_NAV = (
    ("overview", "Overview"),
    ("roots", "Failed roots"),
    ("dead-letters", "Dead letters"),
    ("quality", "Quality"),
)


def breakable(name: str) -> Markup:
    """`name` escaped, with a line-break opportunity after each `.` and `_`: a long
    identifier (`delivery.orders.overdue_roots`) then wraps in a narrow column instead of
    widening the table past the window.

    Example:
        >>> str(breakable("ledger.roots<x>"))
        'ledger.<wbr>roots&lt;x&gt;'
    """
    return Markup(re.sub(r"([._])", r"\1<wbr>", str(escape(name))))  # noqa: S704 - escaped first


def login_path(next_url: str) -> str:
    """Airflow's SimpleAuthManager login page, coming back to `next_url` after."""
    return "/auth/login?" + urlencode({"next": next_url})


class Site:
    """The pages' common parts. `allowed_origins` are this app's own origins besides the
    request's host (for the way back)."""

    def __init__(self, guard: CsrfGuard, *, allowed_origins: Sequence[str]) -> None:
        self.guard = guard
        self.own_hosts = {urlsplit(origin).netloc.lower() for origin in allowed_origins}
        self.env = env = Environment(
            loader=PackageLoader("ackfold.ui", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )
        env.globals.update(
            iso=iso,
            hex64=hex64,
            rid=format_id,
            span=span,
            STATUSES=status.ALL,
            SORTABLE=SORTABLE,
            REPLAY_ROLE=REPLAY_ROLE,
            RETRACT_ROLE=RETRACT_ROLE,
        )
        env.filters["urlencode_pairs"] = urlencode
        env.filters["breakable"] = breakable

    def base(self, request: Request) -> str:
        """The mount prefix of this app (`/ackfold` in Airflow), without a trailing slash."""
        return str(request.scope.get("root_path", "")).rstrip("/")

    def is_api(self, request: Request) -> bool:
        """Whether `request` is to the JSON API (`/api/...`), which answers errors in JSON."""
        return request.url.path.removeprefix(self.base(request)).startswith("/api/")

    def back_link(self, request: Request) -> str:
        """The page a form was posted from (its Referer) if that is one of this app's own
        pages on this server, as a path; else the roots page."""
        fallback = f"{self.base(request)}/roots"
        try:
            parts = urlsplit(request.headers.get("referer", ""))
        except ValueError:
            return fallback
        host = request.headers.get("host", "").lower()
        if parts.scheme not in ("", "http", "https") or (
            parts.netloc and parts.netloc.lower() not in {host, *self.own_hosts}
        ):
            return fallback
        path = parts.path
        if not path.startswith(f"{self.base(request)}/") or path.startswith("//") or "\\" in path:
            return fallback
        return path + (f"?{parts.query}" if parts.query else "")

    def page(
        self,
        request: Request,
        template: str,
        who: Viewer | None,
        status_code: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        """`template` rendered with what every page shows (nav, viewer, CSRF token)."""
        html = self.env.get_template(template).render(
            base=self.base(request),
            viewer=who,
            csrf=self.guard.token(who) if who else "",
            nav=_NAV,
            **context,
        )
        return HTMLResponse(html, status_code=status_code)

    def failure(self, request: Request, code: int, message: str, **extra: Any) -> Response:
        """An error: the error page, or `{"detail": message}` under `/api/`."""
        if self.is_api(request):
            return JSONResponse({"detail": message, **extra}, status_code=code)
        return self.page(request, "error.html", None, code, code=code, message=message, **extra)
