"""The embedded stack's accounts (`airflow.users`): each with its role in Airflow's simple
auth manager, and a password made once, kept with the admin's, readable by its owner only."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable

from ackfold.config import Settings
from ackfold.local.stack import airflow_environment, passwords_file, user_passwords


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
