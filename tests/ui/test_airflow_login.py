"""The plugin with Airflow's real login dependency (`requires_access_view`), anonymous;
its import, which every Airflow task pays: nothing built, no settings loaded; and where it
sends the replay call, from Airflow's configuration.

Runs in a subprocess: Airflow reads its configuration (a throwaway AIRFLOW_HOME) when
first imported. A logged-in request needs Airflow's database (revoked tokens): the
browser test against `airflow standalone` covers that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import PROJECT_DIR

SCRIPT = """
import json, os, sys
os.environ["ACKFOLD_CONFIG"] = "/nonexistent/ackfold.yaml"  # a broken configuration
from ackfold.airflow import plugin as ackfold_ui  # as the airflow.plugins entry point
heavy = ["fastapi", "ackfold.config", "ackfold.ui.app", "airflow.api_fastapi.app"]
at_import = {"built": ackfold_ui._app.built, "loaded": [m for m in heavy if m in sys.modules]}
from airflow.api_fastapi.app import create_auth_manager
create_auth_manager().init()
from fastapi.testclient import TestClient
c = TestClient(ackfold_ui._app, follow_redirects=False)
broken = c.get("/roots").status_code
del os.environ["ACKFOLD_CONFIG"]  # fixed: the next request builds the app
page, api = c.get("/roots?app=orders"), c.get("/api/roots")
forged = c.get("/api/roots", cookies={"_token": "forged"})
forged_page = c.get("/roots", cookies={"_token": "forged"})
post = c.post("/replay/confirm", data={"root_id": "1"})
from airflow.configuration import conf
from ackfold.ui import airflow_auth
def options():
    keys = ("airflow_url", "loopback_url", "allowed_origins")
    return {k: v for k, v in airflow_auth.app_options().items() if k in keys}
unset = options()
conf.set("api", "base_url", "https://airflow.example.com/")
proxied = options()
conf.set("api", "base_url", "")
conf.set("api", "ssl_cert", "/etc/ssl/api.pem")
tls = options()
print(json.dumps({
    "options": {"unset": unset, "proxied": proxied, "tls": tls},
    "at_import": at_import, "broken": broken,
    "page": [page.status_code, page.headers.get("location")],
    "api": api.status_code, "forged": forged.status_code,
    "forged_page": [forged_page.status_code, forged_page.headers.get("location")],
    "post": [post.status_code, post.headers.get("location")],
    "views": ackfold_ui.AckfoldUiPlugin.external_views,
    "prefix": ackfold_ui.AckfoldUiPlugin.fastapi_apps[0]["url_prefix"],
}))
sys.stdout.flush()
os._exit(0)
"""


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What `SCRIPT` saw of the plugin, in a fresh Airflow (one subprocess for the module)."""
    tmp_path = tmp_path_factory.mktemp("plugin")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__API__")},
        "AIRFLOW__API__PORT": "8793",
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "ACKFOLD_VAR_DIR": str(tmp_path / "var"),
        # This checkout's library first, as the tests' own process has it.
        "PYTHONPATH": os.pathsep.join([str(PROJECT_DIR / "include"), str(PROJECT_DIR)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_plugin_refuses_anonymous_users_with_airflows_own_check(
    plugin: dict[str, Any],
) -> None:
    result = plugin
    # Every task process imports the plugin: it builds nothing, loads no settings.
    assert result["at_import"] == {"built": False, "loaded": []}
    assert result["broken"] == 503
    assert result["page"] == [
        303,
        "/auth/login?next=http%3A%2F%2Ftestserver%2Froots%3Fapp%3Dorders",
    ]
    assert result["api"] == 401
    # A token Airflow cannot use (another secret, revoked, expired) is no login at all:
    # the API says 401, a page goes to the login page, not to an error page.
    assert result["forged"] == 401
    assert result["forged_page"] == [303, "/auth/login?next=http%3A%2F%2Ftestserver%2Froots"]
    assert result["post"] == [303, "/auth/login?next=http%3A%2F%2Ftestserver%2Froots"]
    assert result["prefix"] == "/ackfold"
    assert {v["href"] for v in result["views"]} == {
        "/ackfold/overview",
        "/ackfold/roots",
        "/ackfold/dead-letters",
        "/ackfold/quality",
    }
    assert {v["category"] for v in result["views"]} == {"Reliability"}


def test_the_plugin_calls_airflow_at_its_configured_address_never_the_requests(
    plugin: dict[str, Any],
) -> None:
    options = plugin["options"]
    # [api] base_url unset (Airflow's default): the api-server's own port on loopback.
    assert options["unset"] == {
        "airflow_url": None,
        "loopback_url": "http://127.0.0.1:8793",
        "allowed_origins": [],
    }
    # Behind a proxy: base_url takes the call, and its origin may post.
    assert options["proxied"] == {
        "airflow_url": "https://airflow.example.com",
        "loopback_url": None,
        "allowed_origins": ["https://airflow.example.com"],
    }
    # TLS on the api-server and no base_url: no address to call (replays say so).
    assert options["tls"] == {"airflow_url": None, "loopback_url": None, "allowed_origins": []}
