"""The embedded stack's accounts (`airflow.users`): each with its role in Airflow's simple
auth manager, and a password made once, kept with the admin's, readable by its owner only;
and the word count's DAG that `make run` declares."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from ackfold.airflow.app_dags import app_dag_specs, application_path
from ackfold.config import Settings, load_settings
from ackfold.config.demo import DEMO_APP_DAG, DEMO_APP_POLICY
from ackfold.local.stack import (
    airflow_environment,
    demo_app_dag_env,
    passwords_file,
    user_passwords,
)
from ackfold.spark.apps import app_path


def test_every_account_gets_its_role_and_a_password_made_once(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(airflow={"users": {"vic": "viewer", "uma": "user"}})
    env = airflow_environment(settings, base={})
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin,vic:viewer,uma:user"
    first = user_passwords(settings)
    assert list(first) == ["admin", "vic", "uma"]
    assert len(set(first.values())) == 3
    path = passwords_file(settings)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == first
    # Run again, with one more account: the others keep their passwords.
    more = make_settings(airflow={"users": {"vic": "viewer", "uma": "user", "oli": "op"}})
    again = user_passwords(more)
    assert {name: again[name] for name in first} == first
    assert set(again) == {"admin", "vic", "uma", "oli"}


def test_without_users_only_the_admin(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings()
    assert airflow_environment(settings, base={})["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == (
        "admin:admin"
    )
    assert list(user_passwords(settings)) == ["admin"]


def test_make_run_gives_the_demo_app_its_dag_unless_configured(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = demo_app_dag_env(make_settings())
    assert list(env) == ["ACKFOLD_APPS__WORDCOUNT__DAG"]
    # What the Airflow processes read from it: the word count's DAG, on a file that exists.
    monkeypatch.setenv("ACKFOLD_APPS__WORDCOUNT__DAG", env["ACKFOLD_APPS__WORDCOUNT__DAG"])
    settings = load_settings()
    spec = app_dag_specs(settings)["wordcount"]
    # The packaged entry point, wherever the package is installed.
    assert spec == DEMO_APP_DAG.model_copy(
        update={"application": str(app_path("wordcount_app.py"))}
    )
    assert Path(application_path("wordcount", spec, settings)).is_file()
    # Continuous: the app's page shows it alive while the stack runs, stalled if it stops.
    assert spec.mode == "continuous"
    assert settings.app("wordcount").timeout == DEMO_APP_POLICY.timeout  # the demo's policy
    assert settings.app("wordcount").alerts.max_heartbeat_age == timedelta(minutes=1)
    # A DAG of the user's own for the word count stays theirs.
    own = {"wordcount": {"dag": {"application": "jobs/wordcount_app.py"}}}
    assert demo_app_dag_env(make_settings(apps=own)) == {}
