"""How an ackfold DAG task fails on an `AckfoldError`: with the CLI's one line as the
last line of its log (an `AirflowException` whose traceback is one frame), still failing
the task and keeping its retries. Called as the task runner calls them, without a
scheduler."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from ackfold.airflow.compat import airflow_exception, fail_exception
from ackfold.airflow.tasks import reconcile_in_task
from ackfold.ledger.errors import SchemaMismatch


@pytest.fixture(autouse=True)
def _fresh_var_dir(clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))


def test_an_ackfold_error_ends_the_task_log_as_the_clis_one_line(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    # ack_events made by hand, without the contract's columns: SchemaMismatch.
    events = tmp_path / "var" / "warehouse" / "ack_events"
    write_deltalake(str(events), pa.table({"root_id": pa.array(["x"], pa.string())}))
    line = f"ackfold: {events} has no column 'event_id' (contract v1)"
    with pytest.raises(airflow_exception()) as failed:
        reconcile_in_task()
    error = failed.value
    # A retryable failure (AirflowException), not AirflowFailException, as before: a
    # lease that frees, or a table put right, lets the retry run.
    assert not isinstance(error, fail_exception())
    assert str(error) == line
    # What the task runner prints: one frame of ackfold's, then the line, last.
    printed = traceback.format_exception(error)
    assert printed[-1].rstrip("\n").endswith(line)
    ours = [f for f in traceback.extract_tb(error.__traceback__) if "/ackfold/" in f.filename]
    assert [(Path(f.filename).name, f.name) for f in ours] == [("tasks.py", "run")]
    assert error.__cause__ is None
    # The original error is kept (not printed), for whoever debugs it.
    assert isinstance(error.__context__, SchemaMismatch)
    assert error.__suppress_context__


def test_a_wrapped_task_keeps_its_name_and_docstring() -> None:
    assert reconcile_in_task.__name__ == "reconcile_in_task"  # as the DAG tests find it
    assert "reconcile" in str(reconcile_in_task.__doc__)


def test_a_spark_job_through_connect_ends_its_task_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spark job run in the task's process (Spark Connect: `run_spark_app`) that
    raises an `AckfoldError` ends its task with the same one line."""
    import sys

    from ackfold.airflow.spark_jobs import run_spark_app

    job = tmp_path / "job.py"
    job.write_text(
        "from ackfold.ledger.errors import LeaseLost\n"
        'raise LeaseLost("lost the ledger\'s lease to a newer run (lease epoch 7)")\n'
    )
    monkeypatch.setenv("ACKFOLD_SPARK__REMOTE", "sc://localhost:15002")  # never dialled
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(airflow_exception()) as failed:
        run_spark_app(str(job), [])
    assert str(failed.value) == "ackfold: lost the ledger's lease to a newer run (lease epoch 7)"
    assert failed.value.__suppress_context__


def test_a_spark_submit_entry_point_ends_its_output_with_the_one_line(tmp_path: Path) -> None:
    """The entry points spark-submit runs (`ackfold.jobs`) end on an `AckfoldError` with
    the same line on stderr, the last of spark-submit's output in the task's log, and a
    failed exit status; no traceback. Here the job's Delta jars are missing (a fresh var
    dir): refused before any JVM."""
    import os
    import subprocess
    import sys

    from ackfold.jobs import app_path

    env = {**os.environ, "ACKFOLD_VAR_DIR": str(tmp_path / "var")}
    done = subprocess.run(
        [sys.executable, str(app_path("reconcile.py"))],
        env=env,
        cwd=tmp_path,  # not a checkout: the fix named is `ackfold setup`
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith(
        f"ackfold: The delta jars are not in {tmp_path / 'var' / 'jars' / 'delta'}: run "
        "`ackfold setup` to download them there from Maven Central"
    ), last


def test_a_job_in_the_tasks_process_fails_its_task_with_the_jobs_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry point's one line (`SystemExit` with its text), run through Spark Connect
    in the task's process, is the task's failure, as it is."""
    import sys

    from ackfold.airflow.spark_jobs import run_spark_app

    job = tmp_path / "job.py"
    job.write_text(
        "from ackfold.jobs import one_line_errors\n"
        "from ackfold.ledger.errors import LeaseLost\n"
        "with one_line_errors():\n"
        '    raise LeaseLost("lost the ledger\'s lease to a newer run (lease epoch 7)")\n'
    )
    monkeypatch.setenv("ACKFOLD_SPARK__REMOTE", "sc://localhost:15002")  # never dialled
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(airflow_exception()) as failed:
        run_spark_app(str(job), [])
    assert str(failed.value) == "ackfold: lost the ledger's lease to a newer run (lease epoch 7)"
