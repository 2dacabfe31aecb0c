"""The Reliability UI plugin: ackfold's pages in Airflow 3's UI, under "Reliability".

The pages are a FastAPI app (`ackfold.ui.app`) mounted at /ackfold by the api-server;
the nav entries open them inside Airflow's UI. Every page needs an Airflow login with
access to plugins; a replay, the right to trigger `ackfold_manual_replay`. The replay
call goes to `[api] base_url` (else the api-server's loopback address), and the browser
may post from that origin (see docs/security.md).

Airflow imports this module in every task process too: it stays cheap. The app is a
`LazyApp`, built (settings loaded, Airflow's api-server modules imported) on the first
request to /ackfold, in the api-server only.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from ackfold.ui.lazy import LazyApp

PREFIX = "/ackfold"


def _build() -> Any:
    from ackfold.config import load_settings
    from ackfold.ui import airflow_auth
    from ackfold.ui.app import create_app

    return create_app(
        load_settings(), viewer=airflow_auth.airflow_viewer, **airflow_auth.app_options()
    )


_app = LazyApp(_build)


def _view(name: str, path: str, route: str) -> dict[str, str]:
    return {
        "name": name,
        "href": f"{PREFIX}/{path}",
        "url_route": route,  # shown inside Airflow's UI at /plugin/<url_route>
        "destination": "nav",
        "category": "Reliability",
    }


class AckfoldUiPlugin(AirflowPlugin):
    name = "ackfold_ui"  # ackfold.airflow.provider.PLUGIN
    fastapi_apps: list[Any] = [  # noqa: RUF012 (AirflowPlugin's own declaration)
        {"app": _app, "url_prefix": PREFIX, "name": "ackfold reliability"}
    ]
    external_views: list[Any] = [  # noqa: RUF012 (AirflowPlugin's own declaration)
        _view("Overview", "overview", "ackfold-overview"),
        _view("Failed roots", "roots", "ackfold-roots"),
        _view("Dead letters", "dead-letters", "ackfold-dead-letters"),
        _view("Quality", "quality", "ackfold-quality"),
    ]
