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
from ackfold.jobs import app_path
from ackfold_dev.stack import (
    airflow_environment,
    demo_app_env,
    passwords_file,
    user_passwords,
)


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


def test_make_run_registers_the_demo_app_with_its_dag_unless_configured(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The settings alone know nothing of the demo, wherever it has run.
    assert make_settings().apps == {}
    env = demo_app_env(make_settings())
    assert list(env) == ["ACKFOLD_APPS__WORDCOUNT"]
    # What the Airflow processes read from it: the word count's policy and its DAG, on a
    # file that exists.
    monkeypatch.setenv("ACKFOLD_APPS__WORDCOUNT", env["ACKFOLD_APPS__WORDCOUNT"])
    settings = load_settings()
    spec = app_dag_specs(settings)["wordcount"]
    # The packaged entry point, wherever the package is installed.
    assert spec == DEMO_APP_DAG.model_copy(
        update={"application": str(app_path("wordcount_app.py"))}
    )
    assert Path(application_path("wordcount", spec, settings)).is_file()
    policy = settings.app("wordcount")
    assert (policy.timeout, policy.replay_backoff) == (
        DEMO_APP_POLICY.timeout, DEMO_APP_POLICY.replay_backoff
    )  # fmt: skip
    assert settings.apps["wordcount"].stages == DEMO_APP_POLICY.stages
    # Continuous: the app's page shows it alive while the stack runs, stalled if it stops.
    assert spec.mode == "continuous"
    assert settings.app("wordcount").alerts.max_heartbeat_age == timedelta(minutes=1)
    # A DAG and a policy of the user's own for the word count stay theirs, field by field.
    own = {"wordcount": {"max_attempts": 3, "dag": {"application": "jobs/wordcount_app.py"}}}
    monkeypatch.setenv("ACKFOLD_APPS__WORDCOUNT", demo_app_env(make_settings(apps=own))[
        "ACKFOLD_APPS__WORDCOUNT"
    ])  # fmt: skip
    settings = load_settings()
    assert settings.apps["wordcount"].dag.application == "jobs/wordcount_app.py"  # type: ignore[union-attr]
    assert settings.app("wordcount").max_attempts == 3
    assert settings.app("wordcount").timeout == DEMO_APP_POLICY.timeout
