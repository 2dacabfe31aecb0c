"""What the install tier's tests share: a copy of the checkout as a fresh clone has it,
commands run as a user's shell runs them, and a `pip` that is uv's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import PROJECT_DIR

UV = Path(sys.executable).parent / "uv"
# A producer outside Spark, as the README's tour writes one: a completed root and a
# failed one.
# The DAGs ackfold's DAG file declares in a fresh install (no apps configured).
DAGS = {
    "ackfold_reconcile", "ackfold_replay", "ackfold_manual_replay", "ackfold_manual_retract",
    "ackfold_quality", "ackfold_maintenance", "ackfold_smoke",
}  # fmt: skip
PRODUCER = """
from ackfold import LedgerWriter, Tracker, load_settings

tracker = Tracker("webhooks")
good = tracker.spout("evt-1", source="sqs", source_queue="webhooks", payload="{}")
tracker.ack(good, stage="store")
bad = tracker.spout("evt-2", source="sqs", source_queue="webhooks", payload="{}")
tracker.fail(bad, stage="store", reason="no quantity")
writer = LedgerWriter(load_settings().table_root)
print(writer.append(tracker.drain_roots(), tracker.drain(), app_id="webhooks", version=1))
"""


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 900) -> str:
    """`argv`'s stdout; its exit status must be 0 (else its output's ends fail the test)."""
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{' '.join(argv)[:300]} exited {done.returncode}:\n--- stdout\n"
        f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )
    return done.stdout


def copy_checkout(to: Path) -> None:
    """The repository's tracked files as they are now, as a fresh clone has them."""
    listed = run(["git", "ls-files", "-z"], dict(os.environ), PROJECT_DIR).split("\0")
    for name in filter(None, listed):
        source = PROJECT_DIR / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)


def user_env() -> dict[str, str]:
    """This environment without the suite's Airflow, ackfold, Python and virtualenv
    variables: a user's shell."""
    prefixes = ("AIRFLOW", "ACKFOLD_", "PYTHON", "PYTEST", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def pip_shim(shims: Path, venv: Path) -> Path:
    """A `pip` in `shims` that runs uv's pip on `venv` with the same arguments: the
    packages come from uv's cache that `make test` filled, not downloaded again by pip on
    every run. Returns `shims`, for PATH."""
    shims.mkdir(parents=True, exist_ok=True)
    (shims / "pip").write_text(
        f'#!/bin/sh\nexec "{UV}" pip "$@" --python "{venv / "bin" / "python"}"\n'
    )
    (shims / "pip").chmod(0o755)
    return shims
