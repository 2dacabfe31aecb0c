"""ackfold on both ends of its own dependency ranges: the lowest versions its
`pyproject.toml` allows (`uv pip install --resolution lowest-direct`: deltalake 1.0,
duckdb 1.3, pyarrow 16, pydantic 2.10, ...) and the newest the index has. In each, a
virtualenv (`var/venvs/deps-<end>`, made again only when `pyproject.toml` changes) with
ackfold built from the checkout and no Airflow, Spark or GX, runs the tests of the
embedded engine (conformance against the reference fold, reconcile, replay, maintenance,
the lease, the CLI's reads) and of the ledger on the local S3 API (conditional writes).

What an older library lacks, ackfold does without, saying so once (docs/operations/
deploy.md, "Supported versions"): the lowest end deselects the tests that measure
exactly that, and checks the message instead.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR
from tests.install.checkout import UV, run, user_env

ENDS = {
    "lowest": ["--resolution", "lowest-direct"],
    "newest": ["--resolution", "highest", "--upgrade"],
}
# The extras without Airflow, Spark or GX: what the embedded engine and the writers need.
EXTRAS = ("kafka", "metrics")
TOOLS = (
    "pytest<9.2", "pytest-timeout", "pytest-xdist", "filelock", "hypothesis", "psutil",
    "moto[s3]==5.2.5", "flask-cors==6.0.5",
)  # fmt: skip
SELECTION = (
    "tests/conformance", "tests/s3",
    *(f"tests/unit/test_{name}.py" for name in (
        "ledger_encoding", "why_pending", "embedded_maintenance", "reconcile_mark",
        "replay_embedded_books", "replay_embedded_plan", "ledger_lease", "cli_read",
        "cli_turns", "fold", "tracker", "incremental_retention",
    )),
)  # fmt: skip
# The tests that start Spark beside the writers (no pyspark here).
NEEDS_SPARK = (
    "tests/s3/test_no_commit_lost.py",
    "tests/s3/test_refusals.py::test_a_spark_commit_to_a_ledger_table_on_an_object_store_is_refused",
)
# versitygw (the soak's S3 API, beside moto in tests/s3/test_server.py) is found under the
# checkout's var/emulators, which an installed ackfold_dev does not know: its contract
# does not hang on ackfold's dependencies, so it runs in the s3 tier only.
# The modules that read the tuple column as Spark writes it (`ackfold.track.layout`).
IMPORT_SPARK = ("tests/conformance/test_id_schemes.py",)
# The golden ledgers' harness checks each case's quality too: Great Expectations and pandas,
# the `quality` extra, which ackfold's own dependencies leave out.
NEEDS_QUALITY = ("tests/conformance/test_golden.py",)
# What deltalake before 1.2 (parquet encodings) and before 1.6 (filters inside the scan)
# cannot do: the same rows, in larger files or with more decoding; and 1.0's maintenance,
# which loses every try to an app that appends meanwhile (and says so).
DEGRADED = (
    "tests/s3/test_maintenance.py::test_maintenance_on_s3_is_delta_rs_and_loses_no_append",
    "tests/unit/test_ledger_encoding.py::test_the_unique_columns_go_without_a_dictionary",
    "tests/unit/test_cli_read.py::test_show_root_prunes_partitions_and_old_event_files",
    "tests/unit/test_cli_read.py::"
    "test_list_roots_matches_a_full_sort_and_reads_only_the_newest_files",
)
ENCODINGS = (
    "from ackfold.ledger.schema.encoding import writer_properties; writer_properties('ack_events')"
)


def ensure_venv(end: str) -> Path:
    """`var/venvs/deps-<end>`: ackfold's own dependencies at that end, the test tools
    held to them, and ackfold built from the checkout. Returns its python."""
    venv = PROJECT_DIR / "var" / "venvs" / f"deps-{end}"
    python = venv / "bin" / "python"
    digest = hashlib.sha256((PROJECT_DIR / "pyproject.toml").read_bytes()).hexdigest()
    marker = venv / ".installed"
    env = user_env()
    if not (marker.is_file() and marker.read_text() == digest):
        shutil.rmtree(venv, ignore_errors=True)
        run([str(UV), "venv", "-q", "--python", shutil.which("python3.11") or sys.executable,
             str(venv)], env, PROJECT_DIR)  # fmt: skip
        extras = [arg for extra in EXTRAS for arg in ("--extra", extra)]
        run([str(UV), "pip", "install", "-q", "--python", str(python), *ENDS[end],
             "-r", "pyproject.toml", *extras], env, PROJECT_DIR)  # fmt: skip
        held = venv / "held.txt"
        held.write_text(run([str(UV), "pip", "freeze", "--python", str(python)], env, venv))
        run([str(UV), "pip", "install", "-q", "--python", str(python), "-c", str(held),
             *TOOLS], env, PROJECT_DIR)  # fmt: skip
        marker.write_text(digest)
    # ackfold itself, built from the checkout as it is now (not editable: nothing of the
    # checkout's include/ on the path), and the development wing the tests' servers need.
    run([str(UV), "pip", "install", "-q", "--python", str(python), "--no-deps",
         "--reinstall-package", "ackfold", "--reinstall-package", "ackfold-dev", ".", "./dev"],
        env, PROJECT_DIR)  # fmt: skip
    for build in (PROJECT_DIR / "build", PROJECT_DIR / "dev" / "build"):
        shutil.rmtree(build, ignore_errors=True)
    return python


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("end", ENDS)
def test_the_embedded_engine_and_the_ledger_pass_with_ackfolds_dependencies_at(
    end: str,
) -> None:
    python = ensure_venv(end)
    versions = run([str(UV), "pip", "freeze", "--python", str(python)], user_env(), PROJECT_DIR)
    if end == "lowest":
        for pin in ("deltalake==1.0.0", "duckdb==1.3.0", "pyarrow==16.0.0"):
            assert pin in versions.split(), f"not the lowest versions: {versions}"
    deselect = [f"--deselect={test}" for test in (DEGRADED if end == "lowest" else ())]
    env = {**user_env(), "PATH": f"{python.parent}:{user_env()['PATH']}"}
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m",
         "not spark", "-k", "not versitygw", *(f"--deselect={test}" for test in NEEDS_SPARK),
         *(f"--ignore={module}" for module in (*IMPORT_SPARK, *NEEDS_QUALITY)),
         *deselect, *SELECTION],
        cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=1700, check=False,
    )  # fmt: skip
    tail = done.stdout[-4000:]
    assert done.returncode == 0, f"{end}:\n{tail}\n{done.stderr[-2000:]}"
    passed = re.search(r"(\d+) passed", tail)
    assert passed, tail
    assert int(passed.group(1)) > 150, "the embedded engine's and the ledger's tests ran"
    # What the oldest deltalake lacks is said, once, not silently dropped.
    said = subprocess.run(
        [str(python), "-c", ENCODINGS], capture_output=True, text=True, check=True, env=env
    ).stderr
    assert ("cannot choose parquet encodings" in said) == (end == "lowest"), said
