"""Who is looking, and protection of the one state-changing call (the replay trigger).

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
browser never attaches across sites.
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

CSRF_FIELD: Final = "csrf_token"
CSRF_HEADER: Final = "X-CSRF-Token"
CSRF_TTL: Final = 12 * 3600
# Airflow's UI keeps the user's JWT in this cookie (`COOKIE_NAME_JWT_TOKEN`).
TOKEN_COOKIE: Final = "_token"  # noqa: S105 - a cookie name, not a secret


@dataclass(frozen=True)
class Viewer:
    """The logged-in user: `id` binds CSRF tokens, `name` is shown and recorded, `token`
    is the JWT the request authenticated with; `bearer` when it came in a header."""

    id: str
    name: str
    token: str | None
    bearer: bool = False


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


def _host(url: str) -> str:
    """host[:port] of a URL, lower case."""
    return urlsplit(url).netloc.lower()
