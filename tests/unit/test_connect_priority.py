"""A local Spark Connect server's foreachBatch workers must connect back within Spark's
fixed 10 s. On a busy machine they get the CPU first, where this process may give it: the
server's session weighs more than others, and the workers start at a lower niceness."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ackfold.config import load_settings
from ackfold_dev import connect
from ackfold_dev.connect import WORKER_NICENESS, LocalConnectServer, may_raise_priority

needs_privilege = pytest.mark.skipif(
    not may_raise_priority(), reason="this process may not lower a child's niceness"
)


def server(tmp_path: Path) -> LocalConnectServer:
    made = LocalConnectServer(load_settings(var_dir=tmp_path))
    made.base_dir.mkdir(parents=True)
    return made


@needs_privilege
def test_the_workers_start_at_a_lower_niceness(tmp_path: Path) -> None:
    launcher = server(tmp_path)._worker_python()
    assert launcher != sys.executable
    said = subprocess.run(
        [launcher, "-c", "import os, sys; print(os.nice(0), sys.executable)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    niceness, python = said.stdout.split()
    assert int(niceness) == int(subprocess.check_output(["nice"])) + WORKER_NICENESS
    assert python == sys.executable


def test_without_the_privilege_the_workers_are_this_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connect, "may_raise_priority", lambda: False)
    made = server(tmp_path)
    assert made._worker_python() == sys.executable
    assert not (made.base_dir / "python-worker").exists()


@needs_privilege
def test_the_servers_session_weighs_more_than_the_others(tmp_path: Path) -> None:
    made = server(tmp_path)
    made._jvm.start(["30"], command="sleep")  # a process in a session of its own
    try:
        made._raise_group_priority()
        group = Path(f"/proc/{made.pid}/autogroup")
        if not group.exists():
            pytest.skip("this kernel has no autogroups")
        assert group.read_text().split()[-1] == str(WORKER_NICENESS)
    finally:
        made.stop()
