"""ackfold on Python 3.12 and 3.13 as well as 3.11: for each, a virtualenv with the pinned
requirements (`var/venvs/py3.X`, made once and kept while the pins stay the same). On the
newest the fast tier passes, and the Spark tracking tests that depend on the interpreter
too, with PySpark's workers on the same interpreter as the driver; on the versions in
between every module of the library and of the development wing imports."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import suite
from tests.conftest import PROJECT_DIR

VERSIONS = ("3.12", "3.13")
PINS = ("requirements.txt", "requirements-dev.txt", "pyproject.toml")
# What each version runs. The fast tier, and the Spark tests where the interpreter matters
# (a tracked streaming app end to end: Python batches and UDFs on PySpark's workers; the
# ids each side computes, the workers' interpreter, delta-rs's wheel), on the oldest
# supported Python (3.11, the suite's own) and the newest. A version in between gets its
# virtualenv of the pins and imports every module: what breaks there and on neither end
# is an install or a module the interpreter refuses. The fast tier again on 3.12 cost as
# much as on 3.13 (about 1.5 CPU-minutes, the longest group of the run) and showed nothing
# the two ends do not. The rest of the Spark tier is the same JVM work on every Python:
# run once, on 3.11.
# The newest's two runs, the fast tier and the Spark tests, are two tests: each about half
# of the tier's time, with nothing to share but the virtualenv (made under a lock), so
# that the suite's two workers can take one each (tests/conftest.py: GROUPS).
FAST_TIER = ("tests/unit", "tests/ui", "tests/deploy")
SPARK_ON = VERSIONS[-1]
IMPORT_EVERY_MODULE = """
import importlib, pkgutil
names = []
for top in ("ackfold", "ackfold_dev"):
    package = importlib.import_module(top)
    for module in pkgutil.walk_packages(package.__path__, f"{top}."):
        importlib.import_module(module.name)
        names.append(module.name)
print(len(names), "modules imported")
"""
TRACKING = "tests/spark/test_tracking.py::test_"
SPARK_TRACKING = (
    f"{TRACKING}streaming_word_count_writes_the_tracker_events",
    f"{TRACKING}spark_ids_equal_the_python_ids",
    f"{TRACKING}the_workers_run_the_drivers_python",
    f"{TRACKING}delta_rs_appends_v1_rows_that_spark_reads",
)  # fmt: skip


def ensure_venv(python: str, venv: Path) -> Path:
    """`venv` with the pinned requirements and ackfold (editable), made with uv by the
    interpreter `python`; remade only when the pins change. Returns its python."""
    from filelock import FileLock

    venv.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(venv.with_suffix(".lock"))):  # both tests of the newest may ask at once
        return _ensure_venv(python, venv)


def _ensure_venv(python: str, venv: Path) -> Path:
    digest = hashlib.sha256(b"".join((PROJECT_DIR / p).read_bytes() for p in PINS)).hexdigest()
    marker = venv / ".installed"
    if marker.is_file() and marker.read_text() == digest:
        return venv / "bin" / "python"
    uv = str(Path(sys.executable).parent / "uv")
    shutil.rmtree(venv, ignore_errors=True)
    for argv in (
        [uv, "venv", "-q", "--python", python, str(venv)],
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
         "-r", "requirements.txt", "-r", "requirements-dev.txt"],
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "--no-deps",
         "-e", ".", "-e", "dev"],
    ):  # fmt: skip
        done = subprocess.run(
            argv, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=900, check=False
        )
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stderr[-3000:]}"
    marker.write_text(digest)
    return venv / "bin" / "python"


def _venv(version: str) -> tuple[Path, dict[str, str]]:
    """The virtualenv of `version` (skipped when no such Python is installed), and the
    environment of a run of its own there."""
    python = suite.find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} on PATH or in pyenv (pyenv install {version})")
    venv_python = ensure_venv(python, PROJECT_DIR / "var" / "venvs" / f"py{version}")
    found = subprocess.run(
        [str(venv_python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert found.stdout.strip() == version
    # A run of its own: its own marker and shared servers, not this run's, and no xdist
    # worker's variables; and no PYSPARK_PYTHON of this interpreter's, as in a fresh shell
    # of that virtualenv.
    skip = (suite.RUN_MARKER, suite.RUN_DIR, "PYSPARK_PYTHON")
    env = {
        k: v for k, v in os.environ.items() if k not in skip and not k.startswith("PYTEST_XDIST")
    }
    env["PATH"] = f"{venv_python.parent}{os.pathsep}{env.get('PATH', '')}"
    return venv_python, env


def _pytest_on_newest(*selection: str) -> str:
    """What pytest printed, run on the newest Python's virtualenv with `selection`; it
    must pass."""
    venv_python, env = _venv(SPARK_ON)
    done = subprocess.run(
        [str(venv_python), "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         "--durations=0", *selection],
        cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip
    tail = done.stdout[-4000:]
    assert done.returncode == 0, f"Python {SPARK_ON}:\n{tail}\n{done.stderr[-2000:]}"
    assert re.search(r"(\d+) passed", tail), tail
    return done.stdout


@pytest.mark.timeout(1800)
def test_the_fast_tier_passes_on_the_newest() -> None:
    out = _pytest_on_newest(*FAST_TIER)
    passed = re.search(r"(\d+) passed", out[-4000:])
    assert passed
    assert int(passed.group(1)) > 400, "the fast tier ran"


@pytest.mark.timeout(1800)
def test_the_spark_tracking_tests_pass_on_the_newest() -> None:
    out = _pytest_on_newest(*SPARK_TRACKING)
    for test in SPARK_TRACKING:  # each tracking test was called (not skipped) and passed
        called = re.search(rf"s call +{re.escape(test)}\b", out)
        assert called, f"{test} did not run:\n{out[-4000:]}"


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("version", VERSIONS[:-1])
def test_every_module_imports_on_the_versions_in_between(version: str) -> None:
    venv_python, env = _venv(version)
    done = subprocess.run(
        [str(venv_python), "-c", IMPORT_EVERY_MODULE],
        cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"Python {version}:\n{done.stderr[-3000:]}"
    imported = re.search(r"(\d+) modules imported", done.stdout)
    assert imported, done.stdout[-2000:]
    assert int(imported.group(1)) > 150, "every module of ackfold and ackfold_dev"
