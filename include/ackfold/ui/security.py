"""Who is looking, what they may do, and protection of the state-changing calls (the
replay and retract triggers) and of the pages (framing).

Authentication is Airflow's: the app is built with a `viewer` dependency that resolves
the logged-in user (`ackfold.ui.airflow_auth` wraps Airflow's
`requires_access_view(AccessView.PLUGINS)` and `get_user`, which read a Bearer header or
the `_token` cookie) or raises 401/403. The viewer keeps the user's own JWT: the replay is
triggered through Airflow's REST API as that user, with Airflow's own permission checks.

Cross-site requests: every POST must carry a CSRF token (form field `csrf_token` or
header `X-CSRF-Token`): `<issued>.<HMAC-SHA256(secret, user id, issued)>`, valid for
`CSRF_TTL`, bound to the user, not to one JWT (Airflow refreshes those). And its `Origin`
(or, without one, its `Referer`) must be this server or one of `allowed_origins`; a
request with neither is refused unless it authenticates with a Bearer header, which a
browser never attaches across sites. Behind a proxy that rewrites `Host`, the browser's
origin is not the request's host: the plugin allows the origin of `[api] base_url`.

Roles: a viewer may read every page; replaying needs the right to trigger the manual
replay DAG (`can_replay`, from Airflow's auth manager), retracting that of the manual
retract DAG (`can_retract`). Airflow's REST API checks it again when the UI triggers the
run with the user's token.

Framing (`FramingHeaders`): Airflow's UI shows the pages in a frame of its own origin, so
HTML pages may be framed by this origin only; every other response by nobody.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ackfold.effects.params import MANUAL_RETRACT_DAG_ID

CSRF_FIELD: Final = "csrf_token"
CSRF_HEADER: Final = "X-CSRF-Token"
CSRF_TTL: Final = 12 * 3600
# A signed link (`LinkSigner`) holds until the end of the day after the one it was made.
LINK_DAYS: Final = 2
# Airflow's UI keeps the user's JWT in this cookie (`COOKIE_NAME_JWT_TOKEN`).
TOKEN_COOKIE: Final = "_token"  # noqa: S105 - a cookie name, not a secret
REPLAY_ROLE: Final = (
    "replaying needs an Airflow role that may trigger the DAG ackfold_manual_replay "
    "(User, Op or Admin): ask an Airflow admin"
)
RETRACT_ROLE: Final = (
    f"retracting needs an Airflow role that may trigger the DAG {MANUAL_RETRACT_DAG_ID} "
    "(User, Op or Admin): ask an Airflow admin"
)
FRAME_SELF: Final = "frame-ancestors 'self'"
FRAME_NONE: Final = "frame-ancestors 'none'"
# What the pages load: the stylesheet and the small script from this server (no inline
# script, no inline style, no CDN); the charts are inline SVG. Forms post here only.
PAGE_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'"
)
# JSON and static files load nothing.
OTHER_POLICY: Final = "default-src 'none'"
# Links to Airflow or elsewhere carry this origin, never a page's path and query (a
# filter may name roots, apps, stages).
REFERRER_POLICY: Final = "same-origin"


@dataclass(frozen=True)
class Viewer:
    """The logged-in user: `id` binds CSRF tokens, `name` is shown and recorded, `token`
    is the JWT the request authenticated with; `bearer` when it came in a header;
    `can_replay` when Airflow's auth manager lets them trigger the manual replay DAG,
    `can_retract` the manual retract DAG (by default not: a viewer dependency that does
    not ask gets a read-only UI)."""

    id: str
    name: str
    token: str | None
    bearer: bool = False
    can_replay: bool = False
    can_retract: bool = False

    def check_replay(self) -> None:
        """Raise 403, saying which role it takes, unless this viewer may replay."""
        if not self.can_replay:
            raise HTTPException(403, f"{self.name} may read these pages, but {REPLAY_ROLE}")

    def check_retract(self) -> None:
        """Raise 403, saying which role it takes, unless this viewer may retract."""
        if not self.can_retract:
            raise HTTPException(403, f"{self.name} may read these pages, but {RETRACT_ROLE}")


def request_token(request: Request) -> tuple[str | None, bool]:
    """The JWT a request carries, and whether it came as `Authorization: Bearer` (which
    wins over the cookie, as in Airflow's `get_user`)."""
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip(), True
    return request.cookies.get(TOKEN_COOKIE), False


class CsrfGuard:
    """Issues and checks CSRF tokens and the same-origin rule (see the module doc)."""

    def __init__(self, secret: bytes, allowed_origins: Collection[str] = ()) -> None:
        if not secret:
            raise ValueError("the CSRF secret must not be empty")
        self._secret = secret
        self._origins = {_host(origin) for origin in allowed_origins}

    def token(self, viewer: Viewer, now: float | None = None) -> str:
        issued = int(time.time() if now is None else now)
        return f"{issued}.{self._sign(viewer, issued)}"

    def check(self, request: Request, viewer: Viewer, token: str | None) -> None:
        """Raise 403 unless `token` is valid for `viewer` and the request is same-origin."""
        self._check_origin(request, viewer)
        issued_text, _, signature = (token or "").partition(".")
        try:
            issued = int(issued_text)
        except ValueError:
            raise HTTPException(403, "missing or malformed CSRF token: reload the page") from None
        if not hmac.compare_digest(signature, self._sign(viewer, issued)):
            raise HTTPException(403, "invalid CSRF token: reload the page")
        if not 0 <= time.time() - issued <= CSRF_TTL:
            raise HTTPException(403, "expired CSRF token: reload the page")

    def _check_origin(self, request: Request, viewer: Viewer) -> None:
        origin = request.headers.get("origin") or request.headers.get("referer")
        if not origin or origin == "null":
            if viewer.bearer:
                return
            raise HTTPException(403, "cross-site request refused: no Origin or Referer")
        own = request.headers.get("host", "")
        if _host(origin) not in {own.lower(), *self._origins}:
            raise HTTPException(403, "cross-site request refused: foreign Origin")

    def _sign(self, viewer: Viewer, issued: int) -> str:
        message = f"ackfold-csrf\0{viewer.id}\0{issued}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()


class LinkSigner:
    """Signs links that a page hands to requests which carry no login: those of a Data
    Docs page, sandboxed in an origin of its own, to the files of its site's `_static/`
    folder. A signature says the page was served to a logged-in user; it holds for the
    rest of the day it was made and the next (`LINK_DAYS`), the same all day, so that a
    browser caches each file once a day."""

    def __init__(self, secret: bytes) -> None:
        if not secret:
            raise ValueError("the link secret must not be empty")
        self._secret = secret

    def sign(self, now: float | None = None) -> str:
        until = _day(now) + LINK_DAYS
        return f"{until}.{self._signature(until)}"

    def valid(self, token: str | None, now: float | None = None) -> bool:
        until_text, _, signature = (token or "").partition(".")
        if not until_text.isdigit():
            return False
        until = int(until_text)
        return hmac.compare_digest(signature, self._signature(until)) and _day(now) < until

    def _signature(self, until: int) -> str:
        message = f"ackfold-link\0{until}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()


def _day(now: float | None) -> int:
    """Days since the epoch, UTC."""
    return int((time.time() if now is None else now) // 86400)


def _host(url: str) -> str:
    """host[:port] of a URL, lower case."""
    return urlsplit(url).netloc.lower()


class FramingHeaders:
    """ASGI middleware: every response says who may frame it. An HTML page: this origin
    (Airflow's UI shows the pages in its own frames); anything else: nobody. Its
    Content-Security-Policy also says what a page may load (`PAGE_POLICY`); a response
    that sets its own (Data Docs) keeps it. Every response has a `Referrer-Policy`, and
    none is cached unless it says so (pages and JSON show payload previews and reasons:
    `Cache-Control: no-store`; the static files may be cached by this browser only)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def framed(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if "content-security-policy" not in headers:
                    page = headers.get("content-type", "").startswith("text/html")
                    policy = (PAGE_POLICY, FRAME_SELF) if page else (OTHER_POLICY, FRAME_NONE)
                    headers["Content-Security-Policy"] = "; ".join(policy)
                    headers["X-Frame-Options"] = "SAMEORIGIN" if page else "DENY"
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", REFERRER_POLICY)
                headers.setdefault("Cache-Control", "no-store")
            await send(message)

        await self.app(scope, receive, framed)
