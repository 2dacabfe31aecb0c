"""Which Python PySpark's workers run: the driver's own wherever ackfold chooses, and one
clear error before Spark starts when a setting names another version (PySpark would fail
the first Python task of a job instead)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ackfold.config import Settings
from ackfold.errors import AckfoldError


def worker_python(settings: Settings) -> str | None:
    """The Python that runs PySpark's workers on the executors, or None for Spark's default.

    `spark.python` if set. Else, on local and `spark://` masters, this interpreter (it has
    ackfold and the pinned pyspark; a standalone worker would otherwise start `python3`
    from its PATH), unless `PYSPARK_PYTHON` is set, which Spark then honours. On YARN and
    Kubernetes the nodes' Python is theirs to choose: Spark's default.
    """
    if settings.spark.python:
        return settings.spark.python
    if settings.spark.master.startswith(("local", "spark://")):
        return None if os.environ.get("PYSPARK_PYTHON") else sys.executable
    return None


@contextmanager
def workers_run(python: str | None) -> Iterator[None]:
    """`PYSPARK_PYTHON` set to `python` while a classic SparkContext starts (PySpark keeps
    it as the workers' interpreter; the `spark.pyspark.python` conf is only what
    spark-submit turns into this variable), and put back after: processes this one
    starts later are not told which Python to run."""
    if python is None:
        yield
        return
    before = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = python
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = before


class WorkerPythonMismatch(AckfoldError, RuntimeError):
    """PySpark's workers would run another Python version than the driver."""


def check_worker_python(settings: Settings) -> None:
    """Raise `WorkerPythonMismatch` when the workers' Python (`spark.python`, else
    `PYSPARK_PYTHON`) is another version than this interpreter's: PySpark would fail the
    first Python task of a job with a version mismatch; this says it before, naming the
    setting. With neither set, the workers run this very interpreter."""
    chosen = settings.spark.python or os.environ.get("PYSPARK_PYTHON")
    if not chosen or chosen == sys.executable:
        return
    where = "spark.python" if settings.spark.python else "PYSPARK_PYTHON"
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        found = subprocess.run(
            [chosen, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        # A cluster's workers may keep Python where this machine has none: Spark decides.
        if settings.spark.master.startswith("local"):
            raise WorkerPythonMismatch(
                f"{where} is {chosen}, which does not run here ({exc}): unset it, or name a "
                f"Python {mine}"
            ) from None
        return
    if found != mine:
        raise WorkerPythonMismatch(
            f"{where} is {chosen}, Python {found}, but ackfold runs on Python {mine}: "
            "PySpark's workers must run the driver's version; unset it, or name a Python "
            f"{mine} with ackfold installed"
        )
