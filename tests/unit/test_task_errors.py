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
