"""ackfold installed as a team installs it into its Airflow: the wheel, built from a
copy of the checkout and installed with the README's own lines into a fresh virtualenv
with nothing from the checkout on its path, then `airflow standalone` on a DAGs folder
that holds only the README's DAG file. Every ackfold DAG loads, the Reliability UI's
pages answer after login (and only after), the provider is listed, and a reconcile run
folds what a producer wrote, all without a JVM."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ackfold_dev.stack import wait_healthy
from tests.conftest import PROJECT_DIR
from tests.docs.test_examples import Block, blocks
from tests.embedded_stack import Stack, free_port
from tests.install.checkout import DAGS, PRODUCER, copy_checkout, pip_shim, run, user_env

# The deploy page's blocks this test runs, in order: the install, the DAG file, the pool.
MARK = "tests/install/test_wheel.py"
DEPLOY = PROJECT_DIR / "docs" / "operations" / "deploy.md"
# A fresh Airflow on 2 cores shared with the other tiers: minutes to answer its health
# check and to parse the DAG file.
START_WAIT = 600
RUN_WAIT = 600
# Where the packaged entry points are, from the installed package alone.
ENTRY_POINTS = """
import json, sys
from ackfold.airflow.dags import ackfold_dags
task = ackfold_dags()["ackfold_reconcile"].get_task("reconcile")
print(json.dumps({"application": getattr(task, "application", None), "path": sys.path}))
"""


def readme_blocks() -> tuple[Block, Block, Block]:
    """The deploy page's blocks for a new virtualenv (the install, the DAG file, the pool);
    the README's DAG file is the same."""
    found = [b for b in blocks(DEPLOY) if MARK in (b.note or "")]
    assert [b.lang for b in found] == ["bash", "python", "bash"], found
    install, dag_file, pool = found
    readme = [b.code for b in blocks(PROJECT_DIR / "README.md") if MARK in (b.note or "")]
    assert readme == [dag_file.code], "the README's DAG file differs from the deploy page's"
    return install, dag_file, pool


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh virtualenv with ackfold installed by the README's lines, and the
    environment a user's shell has there: its `bin` first, nothing of the checkout's."""
    root = tmp_path_factory.mktemp("install")
    checkout, venv = root / "checkout", root / "venv"
    copy_checkout(checkout)
    system_python = shutil.which("python3.11") or sys.executable
    env = user_env()
    run([system_python, "-m", "venv", str(venv)], env, root)
    shims = pip_shim(root / "shims", venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{shims}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(venv)
    install, _, _ = readme_blocks()
    run(["bash", "-euo", "pipefail", "-c", install.code], env, checkout)
    del env["VIRTUAL_ENV"]
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH'].split(os.pathsep, 2)[2]}"
    return venv, env


@pytest.fixture(scope="module")
def airflow(
    installed: tuple[Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, dict[str, str]]]:
    """`airflow standalone` of the fresh virtualenv, run outside the checkout, on a DAGs
    folder with only the README's DAG file; the README's pool created once it is up."""
    venv, user_env = installed
    home = tmp_path_factory.mktemp("deployment")
    (home / "dags").mkdir()
    _, dag_file, pool = readme_blocks()
    (home / "dags" / "ackfold_dags.py").write_text(dag_file.code)
    var = home / "var"
    (var / "airflow").mkdir(parents=True)
    passwords = var / "airflow" / "passwords.json"
    passwords.write_text(json.dumps({"admin": secrets.token_urlsafe(12)}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **user_env,
        "AIRFLOW_HOME": str(var / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "ACKFOLD_VAR_DIR": str(var),
        "GX_ANALYTICS_ENABLED": "false",
    }
    log_path = home / "standalone.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(venv / "bin" / "airflow"), "standalone"], cwd=home, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        stack = Stack(url, var, "", process, log_path)  # type: ignore[arg-type]
        try:
            wait_healthy(f"{url}/api/v2/monitor/health", START_WAIT, lambda: process.poll() is None)
            run(["bash", "-euo", "pipefail", "-c", pool.code], env, home)
            yield stack, env
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=30)


def test_nothing_of_the_checkout_is_on_the_installed_path(
    installed: tuple[Path, dict[str, str]],
) -> None:
    venv, user = installed
    # The DAG file loads Airflow: a deployment, which names its warehouse (README).
    env = {**user, "ACKFOLD_WAREHOUSE": str(venv / "warehouse")}
    found = json.loads(run([str(venv / "bin" / "python"), "-c", ENTRY_POINTS], env, venv))
    assert not [p for p in found["path"] if str(PROJECT_DIR) in p], found["path"]
    # Without the Spark provider (the `airflow-spark` extra), the Spark engine's DAGs are
    # refused with the extra to install, not a bare ImportError.
    env_spark = {**env, "ACKFOLD_ENGINE__KIND": "spark", "ACKFOLD_VAR_DIR": str(venv / "var")}
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", ENTRY_POINTS],
        cwd=venv, env=env_spark, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "ackfold[airflow-spark]" in done.stderr, done.stderr[-2000:]
    # The Spark jobs' entry points are in the package, in the virtualenv's site-packages.
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    printed = Path(
        run([str(venv / "bin" / "ackfold"), "spark-app", "reconcile.py"], env, venv).strip()
    )
    assert printed.is_file()
    assert printed.is_relative_to(site / "site-packages" / "ackfold")
    # The wheel holds no development server: no `ackfold.local`, no `ackfold_dev`; a
    # development command says where it runs.
    packages = site / "site-packages"
    assert not (packages / "ackfold" / "local").exists()
    assert not list(packages.glob("ackfold_dev*"))
    done = subprocess.run(
        [str(venv / "bin" / "ackfold"), "sqs"],
        cwd=venv, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "`ackfold sqs` is a development command" in done.stderr


def test_every_ackfold_dag_loads_and_the_provider_is_listed(
    airflow: tuple[Stack, dict[str, str]],
) -> None:
    stack, env = airflow
    token = stack.token()
    deadline = time.monotonic() + START_WAIT
    loaded: set[str] = set()
    while time.monotonic() < deadline and loaded != DAGS:
        status, body = stack.call("GET", "/api/v2/dags?limit=100", token=token)
        assert status == 200, body
        loaded = {dag["dag_id"] for dag in body["dags"]}
        time.sleep(3)
    assert loaded == DAGS, "the DAG file declares every ackfold DAG and nothing else"
    status, errors = stack.call("GET", "/api/v2/importErrors", token=token)
    assert (status, errors["total_entries"]) == (200, 0), errors
    listed = run(["airflow", "providers", "list", "--output", "json"], env, stack.var)
    (ours,) = [p for p in json.loads(listed) if p["package_name"] == "ackfold"]
    assert ours["version"] == run(["ackfold", "--version"], env, stack.var).split()[-1]


def test_the_reliability_ui_answers_after_login_only(airflow: tuple[Stack, dict[str, str]]) -> None:
    stack, _ = airflow
    assert stack.call("GET", "/ackfold/api/apps")[0] == 401
    token = stack.token()
    for path in ("/ackfold/overview", "/ackfold/roots", "/ackfold/dead-letters"):
        status, page = stack.page(path, token)
        assert status == 200, (path, page[-500:])
        assert "ackfold" in page
    status, apps = stack.call("GET", "/ackfold/api/apps", token=token)
    assert status == 200, apps


def test_a_reconcile_run_folds_what_a_producer_wrote(airflow: tuple[Stack, dict[str, str]]) -> None:
    stack, env = airflow
    run(["python", "-c", PRODUCER], env, stack.var)
    # A team's Airflow creates new DAGs paused (its default): unpaused as a user does.
    run(["airflow", "dags", "unpause", "ackfold_reconcile"], env, stack.var)
    dag_run = stack.run_dag("ackfold_reconcile", stack.token(), RUN_WAIT)
    assert dag_run["state"] == "success", stack.log.read_text()[-3000:]
    for status, reason in (("failed", "no quantity"), ("completed", None)):
        listed = run(
            ["ackfold", "roots", "--app", "webhooks", "--status", status, "--json"], env, stack.var
        )
        (root,) = json.loads(listed)
        assert root["fail_reason"] == reason
