"""The run's report of processes that outlived the process that started them
(`tests.suite.orphans`, listed by `TierTimes` at the end): found by the run's marker and
this worker's id, whoever started them; none of another run or another worker."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests import suite


def _orphan(env: dict[str, str]) -> int:
    """A `sleep` whose shell has left: adopted by init, as a JVM whose driver left is."""
    done = subprocess.run(
        ["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(done.stdout)


def test_a_process_left_by_its_parent_is_found_with_its_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = f"orphans-{os.getpid()}"
    monkeypatch.setenv(suite.RUN_MARKER, token)
    ours = _orphan(dict(os.environ))
    other_run = _orphan(dict(os.environ, **{suite.RUN_MARKER: "another run"}))
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    other_worker = _orphan(dict(os.environ, PYTEST_XDIST_WORKER=f"{worker or 'gw'}-other"))
    try:
        deadline = time.monotonic() + 10
        found = suite.orphans(token)
        while ours not in found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = suite.orphans(token)
        argv, seconds = found[ours]
        assert argv.startswith("sleep 30")
        assert seconds >= 0
        assert other_run not in found
        assert other_worker not in found
    finally:
        for pid in (ours, other_run, other_worker):
            os.kill(pid, 9)
