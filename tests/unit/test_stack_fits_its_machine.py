"""The embedded stack fits the machine it runs on: Airflow runs as many tasks at once as
the cores allow (the LocalExecutor forks that many workers), its metadata database is
readable by its owner only, and a process the stack started that ends (the demo, once
it has handed its app over) is reaped at once, not left a zombie until Ctrl-C."""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ackfold.config import Settings
from ackfold_dev.airflow_env import airflow_parallelism, keep_private, metadata_database
from ackfold_dev.stack import Supervisor, airflow_environment


def test_airflow_runs_as_many_tasks_as_the_cores_allow(
    make_settings: Callable[..., Settings],
) -> None:
    env = airflow_environment(make_settings(), base={})
    assert env["AIRFLOW__CORE__PARALLELISM"] == str(airflow_parallelism(os.cpu_count()))
    assert int(env["AIRFLOW__CORE__PARALLELISM"]) <= max(4, 2 * (os.cpu_count() or 1))
    # Airflow's own setting, where the user gives it, wins.
    given = airflow_environment(make_settings(), base={"AIRFLOW__CORE__PARALLELISM": "3"})
    assert given["AIRFLOW__CORE__PARALLELISM"] == "3"


def test_the_metadata_database_is_private(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings()
    env = airflow_environment(settings, base={})
    assert settings.airflow_home is not None
    database = metadata_database(env, settings.airflow_home)
    assert database == Path(env["AIRFLOW_HOME"]) / "airflow.db"
    keep_private(database)  # made before Airflow makes it, as prepare_airflow does
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    assert database.read_bytes() == b"", "an empty file, which SQLite takes as a new database"
    older = tmp_path / "older.db"  # one an earlier version left world-readable
    older.write_bytes(b"SQLite format 3\0")
    older.chmod(0o644)
    keep_private(older)
    assert stat.S_IMODE(older.stat().st_mode) == 0o600
    assert older.read_bytes() == b"SQLite format 3\0"


def _state(pid: int) -> str | None:
    """The process's state letter (`Z` for a zombie), None once it is gone."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return stat_line.rsplit(")", 1)[1].split()[0]


def test_a_process_that_ends_is_reaped_at_once() -> None:
    supervisor = Supervisor()
    done = supervisor.start([sys.executable, "-c", "pass"], dict(os.environ), None)
    running = supervisor.start([sys.executable, "-c", "import time; time.sleep(60)"],
                               dict(os.environ), None)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while _state(done.pid) != "Z":  # it ended; nobody has waited for it yet
            assert time.monotonic() < deadline, _state(done.pid)
            time.sleep(0.05)
        assert supervisor.reap() == [done]
        assert _state(done.pid) is None, "reaped: no zombie left"
        assert done.returncode == 0
        assert supervisor.reap() == [], "each ended process is reported once"
        assert _state(running.pid) not in (None, "Z")
    finally:
        supervisor.stop(grace=5)
