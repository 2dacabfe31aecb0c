"""The UI's link to Airflow 3: who the viewer is and what they may do, where to log in,
which secret, and where Airflow's API and the browser's origin are.

Imported by the plugin only (it imports Airflow). Every route of the UI depends on
`airflow_viewer`, which runs Airflow's own `get_user` (a Bearer header, else the `_token`
cookie of Airflow's UI; anonymous, expired or unusable: 401) and the check of
`requires_access_view(AccessView.PLUGINS)` (no right to plugins: 403), and asks the auth
manager whether the user may trigger the manual replay DAG (`Viewer.can_replay`) and the
manual retract DAG (`Viewer.can_retract`): any auth manager's roles apply (the simple
one's viewer/user/op/admin, FAB's Viewer/User/Op/Admin, Keycloak's).
"""

from __future__ import annotations

from typing import Annotated, Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import (
    AccessView,
    DagAccessEntity,
    DagDetails,
)
from airflow.api_fastapi.core_api.security import (
    bearer_scheme,
    get_user,
    requires_access_view,
)
from airflow.configuration import conf
from fastapi import Depends, HTTPException, Request

from ackfold.effects.params import MANUAL_RETRACT_DAG_ID
from ackfold.replay.params import MANUAL_REPLAY_DAG_ID
from ackfold.ui.security import Viewer, request_token


async def airflow_user(request: Request, bearer: Annotated[Any, Depends(bearer_scheme)]) -> Any:
    """Airflow's `get_user`, except that a token Airflow cannot use (signed with another
    secret, revoked at logout, malformed: its 403 "Invalid JWT token") is 401, as no
    token is: the pages send the browser to log in again instead of an error page."""
    try:
        return await get_user(request, None, bearer)
    except HTTPException as exc:
        if exc.status_code == 403:
            raise HTTPException(401, f"{exc.detail}: log in again") from None
        raise


async def airflow_viewer(
    request: Request,
    user: Annotated[Any, Depends(airflow_user)],
) -> Viewer:
    # Airflow's own check of the right to see plugins (403 without it), on that user.
    requires_access_view(AccessView.PLUGINS)(request, user)
    token, bearer = request_token(request)

    def may_trigger(dag_id: str) -> bool:
        # What Airflow's REST API checks when the UI triggers the run: POST a DAG run.
        return bool(
            get_auth_manager().is_authorized_dag(
                method="POST",
                access_entity=DagAccessEntity.RUN,
                details=DagDetails(id=dag_id),
                user=user,
            )
        )

    return Viewer(
        id=str(user.get_id()),
        name=str(user.get_name()),
        token=token,
        bearer=bearer,
        can_replay=may_trigger(MANUAL_REPLAY_DAG_ID),
        can_retract=may_trigger(MANUAL_RETRACT_DAG_ID),
    )


def login_url(next_url: str) -> str:
    """The auth manager's login page, coming back to `next_url`."""
    return str(get_auth_manager().get_url_login(next_url=next_url))


def csrf_secret() -> bytes:
    """Airflow's `[api] secret_key`: the same on every api-server worker."""
    return str(conf.get("api", "secret_key")).encode()


def base_url() -> str | None:
    """Airflow's `[api] base_url` when set (behind a proxy, the address users open)."""
    value = conf.get("api", "base_url", fallback=None)
    return str(value).rstrip("/") if value else None


def loopback_url() -> str | None:
    """The api-server's own address on loopback (`[api] port`), for the replay call when
    `[api] base_url` is unset; None when it serves TLS (`[api] ssl_cert`), whose
    certificate does not name 127.0.0.1."""
    if conf.get("api", "ssl_cert", fallback=""):
        return None
    return f"http://127.0.0.1:{conf.getint('api', 'port')}"


def app_options() -> dict[str, Any]:
    """`create_app`'s keywords from Airflow's configuration: the login, the CSRF secret,
    Airflow's API (never the request's `Host`) and the browser's origin behind a proxy
    (that of `[api] base_url`)."""
    base = base_url()
    return {
        "csrf_secret": csrf_secret(),
        "login_url": login_url,
        "airflow_url": base,
        "loopback_url": None if base else loopback_url(),
        "allowed_origins": [base] if base else [],
    }
