"""ackfold installed into the Airflow a team already runs, for every supported minor.

For each `tests/install/airflow/<minor>.txt` (the pins of that release's constraints that
matter to ackfold, written by `scripts/airflow_pins.py`): a fresh virtualenv gets the
team's Airflow (that release with the standard and SMTP providers, as of a day after its
upload, under those pins), then ackfold by the documented lines of the README (which
`docs/operations/deploy.md` repeats): the built wheel, `apache-airflow==` the installed
version, the release's constraints. Then:

- no package the team had changes version: the install never touches its Airflow;
- the README's DAG file loads every ackfold DAG with no import error, each left to the
  deployment's `dags_are_paused_at_creation`; with the repository's `plugins/` as the
  plugins folder, the Reliability UI registers once; the provider is listed with its
  notifier;
- in that deployment, with `ACKFOLD_WAREHOUSE` and no `ACKFOLD_VAR_DIR`, a reconcile task
  run by `airflow tasks test` folds what a producer wrote, and keeps its state under
  `AIRFLOW_HOME`; without the warehouse, the DAG file's error names `ACKFOLD_WAREHOUSE`;
- each documented set of extras resolves under the release's pins, or fails on exactly
  the conflict the deploy page names.

No JVM, no Spark or GX installed: the extras beyond `airflow` are resolved, not installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ackfold import __version__
from tests.conftest import PROJECT_DIR
from tests.docs.test_examples import blocks
from tests.install.checkout import DAGS, PRODUCER, UV, copy_checkout, pip_shim, run, user_env

PINS_DIR = Path(__file__).parent / "airflow"
DEPLOY = PROJECT_DIR / "docs" / "operations" / "deploy.md"
MARK = "tests/install/test_airflow_matrix.py"
CONSTRAINTS_URL = (
    "https://raw.githubusercontent.com/apache/airflow/constraints-${AIRFLOW_VERSION}/"
    "constraints-${PYTHON_VERSION}.txt"
)
# What the DAG file, the plugins and the providers look like to that Airflow, in its own
# process: one script, not a CLI start for each.
# Whether root_state holds the reconcile's mark of the ack_events it folded.
MARKED = """
from deltalake import DeltaTable
from ackfold import load_settings
from ackfold.ledger.commits.marks import read_mark
from ackfold.ledger.schema.tables import ACK_EVENTS, Ledger

ledger = Ledger(load_settings().table_root)
events = DeltaTable(ledger.path(ACK_EVENTS))
print("marked" if read_mark(ledger, None, events.metadata().id) is not None else "unmarked")
"""
INSPECT = """
import json, os, sys
try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:
    from airflow.models.dagbag import DagBag
from airflow import plugins_manager
from airflow.providers_manager import ProvidersManager

bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
plugins = [p["name"] for p in plugins_manager.get_plugin_info()]
folder = os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"]
from_folder = [n for n, m in list(sys.modules.items())
               if str(getattr(m, "__file__", "") or "").startswith(folder)]
providers = ProvidersManager()
ours = providers.providers.get("ackfold")
os.environ.pop("ACKFOLD_WAREHOUSE")
try:
    from ackfold.airflow.dags import ackfold_dags
    ackfold_dags()
    unset = None
except Exception as exc:
    unset = str(exc)
print(json.dumps({
    "dags": {d: dag.is_paused_upon_creation for d, dag in bag.dags.items()},
    "errors": {str(k): v[-500:] for k, v in bag.import_errors.items()},
    "plugins": plugins,
    "from_plugins_folder": from_folder,
    "provider": ours.version if ours else None,
    "notifiers": [getattr(n, "notification_class_name", n) for n in providers.notification],
    "without_warehouse": unset,
}))
"""


@dataclass(frozen=True)
class Release:
    minor: str
    version: str
    as_of: str
    pins: Path


def releases() -> list[Release]:
    found = []
    for pins in sorted(PINS_DIR.glob("3.*.txt")):
        text = pins.read_text()
        version = re.search(r"^apache-airflow==(\S+)$", text, re.M)
        as_of = re.search(r"^# as of: (\S+)$", text, re.M)
        assert version, f"{pins}: no apache-airflow pin"
        assert as_of, f"{pins}: no `# as of:` line"
        found.append(Release(pins.stem, version.group(1), as_of.group(1), pins))
    return found


def documented_lines() -> tuple[str, str]:
    """The lines this test runs: the wheel's build, then its install, as the deploy page
    gives them and the README repeats them in one block."""
    found = {}
    for page in (PROJECT_DIR / "README.md", DEPLOY):
        found[page.name] = [b.code for b in blocks(page) if MARK in (b.note or "")]
    readme, deploy = found["README.md"], found["deploy.md"]
    assert len(deploy) == 2, f"deploy.md: two blocks marked {MARK}, found {len(deploy)}"
    assert readme == ["\n".join(line.rstrip("\n") for line in deploy) + "\n"], (
        "the README's install lines differ from the deploy page's"
    )
    return deploy[0], deploy[1]


def extras_table() -> dict[str, dict[str, str]]:
    """The deploy page's table of what resolves: extras -> minor -> the cell's text."""
    lines = DEPLOY.read_text().split("<!-- extras by Airflow minor -->", 1)[1].splitlines()
    rows = []
    for line in lines[1:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    table = {}
    for row in rows[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        table[cells[0].strip("`")] = dict(zip(header[1:], cells[1:], strict=True))
    return table


def freeze(venv: Path) -> dict[str, str]:
    python = str(venv / "bin" / "python")
    listed = run([str(UV), "pip", "list", "--format", "json", "--python", python], user_env(), venv)
    return {p["name"].lower(): p["version"] for p in json.loads(listed)}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of the checkout with the wheel built in its dist/ by the deploy page's line,
    beside an older wheel (the second build of a checkout)."""
    root = tmp_path_factory.mktemp("matrix-checkout")
    copy_checkout(root)
    (root / "dist").mkdir()
    (root / "dist" / "ackfold-0.0.9-py3-none-any.whl").write_bytes(b"an older build")
    build, _ = documented_lines()
    env = {**user_env(), "PATH": f"{Path(sys.executable).parent}:{user_env()['PATH']}"}
    time.sleep(1)  # the new wheel is newer than the old one, to the second
    run(["bash", "-euo", "pipefail", "-c", build], env, root)
    yield root
    shutil.rmtree(root / "build", ignore_errors=True)


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("release", releases(), ids=lambda r: r.minor)
def test_ackfold_installs_into_the_teams_airflow_and_reconciles_there(
    release: Release, checkout: Path, tmp_path: Path
) -> None:
    venv, home = tmp_path / "venv", tmp_path / "airflow-home"
    python = str(venv / "bin" / "python")
    env = user_env()
    run([str(UV), "venv", "-q", "--python", shutil.which("python3.11") or sys.executable,
         str(venv)], env, tmp_path)  # fmt: skip
    # The team's Airflow, as it was installed around its release.
    run([str(UV), "pip", "install", "-q", "--python", python, "--exclude-newer", release.as_of,
         f"apache-airflow=={release.version}", "apache-airflow-providers-standard",
         "apache-airflow-providers-smtp", "-c", str(release.pins)], env, tmp_path)  # fmt: skip
    before = freeze(venv)
    assert before["apache-airflow"] == release.version

    # ackfold, by the deploy page's lines, in a shell of that virtualenv.
    _, install = documented_lines()
    assert CONSTRAINTS_URL in install
    shell = {**env, "PATH": f"{venv / 'bin'}:{pip_shim(tmp_path / 'shims', venv)}:{env['PATH']}"}
    run(["bash", "-euo", "pipefail", "-c", install.replace(CONSTRAINTS_URL, str(release.pins))],
        shell, checkout)  # fmt: skip
    after = freeze(venv)
    changed = {name: (v, after.get(name)) for name, v in before.items() if after.get(name) != v}
    assert not changed, f"the install changed the team's packages: {changed}"
    assert "ackfold" in after

    # The deployment: its DAGs folder holds the README's DAG file, its plugins folder
    # is the repository's plugins/.
    (home / "dags").mkdir(parents=True)
    readme_dag = next(b for b in blocks(PROJECT_DIR / "README.md") if b.lang == "python"
                      and "ackfold_dags()" in b.code)  # fmt: skip
    (home / "dags" / "ackfold_dags.py").write_text(readme_dag.code)
    shutil.copytree(checkout / "plugins", home / "plugins")
    work = tmp_path / "work"
    work.mkdir()
    deployment = {
        **env,
        "PATH": f"{venv / 'bin'}:{env['PATH']}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "ACKFOLD_WAREHOUSE": str(tmp_path / "warehouse"),
        "GX_ANALYTICS_ENABLED": "false",
    }
    seen = json.loads(run([python, "-c", INSPECT], deployment, work).strip().splitlines()[-1])
    assert seen["errors"] == {}
    assert set(seen["dags"]) == DAGS
    # None: Airflow's own `dags_are_paused_at_creation` decides.
    assert set(seen["dags"].values()) == {None}
    assert seen["from_plugins_folder"], "Airflow did not load the plugins folder"
    assert seen["plugins"].count("ackfold_ui") == 1, seen["plugins"]
    assert seen["provider"] == after["ackfold"]
    assert "ackfold.alerts.notifiers.WebhookNotifier" in seen["notifiers"]
    assert "ACKFOLD_WAREHOUSE" in (seen["without_warehouse"] or ""), seen["without_warehouse"]

    # The deployment's database, and its DAG processor's work: the DAGs and the assets
    # they update registered (a task whose outlet asset is unknown refuses to run), each
    # paused as the deployment says (Airflow's default: paused).
    run(["airflow", "db", "migrate"], deployment, work)
    run(["airflow", "dags", "reserialize"], deployment, work)
    listed = run(["airflow", "dags", "list", "--output", "json"], deployment, work)
    # One JSON line; Airflow's warnings (graphviz) may come before it on stdout.
    dags = json.loads(next(line for line in listed.splitlines() if line.startswith("[{")))
    paused = {dag["dag_id"]: str(dag["is_paused"]).lower() for dag in dags}
    assert paused == dict.fromkeys(DAGS, "true"), paused
    # A reconcile through Airflow's own test command, on what a producer wrote.
    run([python, "-c", PRODUCER], deployment, work)
    # Its exit status says little (3.0 exits 0 when the task fails): the roots tell.
    tested = subprocess.run(
        ["airflow", "tasks", "test", "ackfold_reconcile", "reconcile"],
        cwd=work, env=deployment, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    log = f"airflow tasks test:\n{tested.stdout[-3000:]}\n{tested.stderr[-3000:]}"
    for status, reason in (("failed", "no quantity"), ("completed", None)):
        listed = subprocess.run(
            ["ackfold", "roots", "--app", "webhooks", "--status", status, "--json"],
            cwd=work, env=deployment, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert listed.returncode == 0, f"{listed.stderr[-500:]}\n{log}"
        (root,) = json.loads(listed.stdout)
        assert root["fail_reason"] == reason
    # The reconcile marked what it folded, in root_state (with this release's deltalake):
    # the next one reads only what came after.
    assert run([python, "-c", MARKED], deployment, work).split()[-1] == "marked", log
    # Its state went under the Airflow home, none into the directory it ran in.
    assert list((home / "ackfold" / "run").glob("ledger-*.lock"))
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("release", releases(), ids=lambda r: r.minor)
def test_each_set_of_extras_resolves_under_the_release_or_fails_as_the_deploy_page_says(
    release: Release, checkout: Path
) -> None:
    (wheel,) = checkout.glob(f"dist/ackfold-{__version__}-*.whl")
    for extras, cells in extras_table().items():
        said = cells[release.minor]
        done = resolve(f"ackfold[{extras}] @ {wheel.as_uri()}", release)
        if said.startswith("resolves"):
            assert done.returncode == 0, f"[{extras}] on {release.minor}: {done.stderr[-2000:]}"
        else:
            assert done.returncode != 0, f"[{extras}] on {release.minor} resolves: {said}"
            # The page names the pin that conflicts, as `name==version`.
            pins = re.findall(r"`([a-z0-9-]+==[^`]+)`", said)
            assert pins, f"the cell for [{extras}] on {release.minor} names no pin: {said}"
            for pin in pins:
                assert pin.split("==")[0] in done.stderr, (pin, done.stderr[-2000:])


def resolve(requirement: str, release: Release) -> subprocess.CompletedProcess[str]:
    """uv's resolution of `requirement` with the release's Airflow and pins (no install)."""
    return subprocess.run(
        [str(UV), "pip", "compile", "-q", "--python-version", "3.11", "--no-header", "-",
         "-c", str(release.pins), "-o", "/dev/null"],
        input=f"{requirement}\napache-airflow=={release.version}\n",
        capture_output=True, text=True, timeout=600, check=False, env=user_env(),
    )  # fmt: skip
