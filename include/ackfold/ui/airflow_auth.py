"""The UI's link to Airflow 3's login: who the viewer is, where to log in, which secret.

Imported by the plugin only (it imports Airflow). Every route of the UI depends on
`airflow_viewer`, which runs Airflow's own `requires_access_view(AccessView.PLUGINS)`
(anonymous: 401, no right to plugins: 403) and `get_user` (a Bearer header, else the
`_token` cookie of Airflow's UI).
"""

from __future__ import annotations

from typing import Annotated, Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
from airflow.api_fastapi.core_api.security import get_user, requires_access_view
from airflow.configuration import conf
from fastapi import Depends, Request

from ackfold.ui.security import Viewer, request_token


async def airflow_viewer(
    request: Request,
    _access: Annotated[None, Depends(requires_access_view(AccessView.PLUGINS))],
    user: Annotated[Any, Depends(get_user)],
) -> Viewer:
    token, bearer = request_token(request)
    return Viewer(id=str(user.get_id()), name=str(user.get_name()), token=token, bearer=bearer)


def login_url(next_url: str) -> str:
    """The auth manager's login page, coming back to `next_url`."""
    return str(get_auth_manager().get_url_login(next_url=next_url))


def csrf_secret() -> bytes:
    """Airflow's `[api] secret_key`: the same on every api-server worker."""
    return str(conf.get("api", "secret_key")).encode()


def base_url() -> str | None:
    """Airflow's `[api] base_url` when set (behind a proxy), else None: the request's."""
    value = conf.get("api", "base_url", fallback=None)
    return str(value) if value else None
