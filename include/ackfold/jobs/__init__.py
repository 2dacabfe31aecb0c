"""The spark-submit entry points of ackfold's jobs: reconcile, replay, quality,
maintenance and smoke on the Spark engine, and the word-count demo's two. They ship
inside the package, so a task finds them from the installed package (`app_path`),
wherever pip put it, never from a checkout.

They stand on the top floor, beside the CLI and the DAGs: each one parses its
arguments, makes its session (`ackfold.spark`) and calls a verb's run function, so
nothing below imports them. (They were `ackfold.spark.apps`, inside the session
package; that name still answers, with a deprecation warning.)

Example:
    >>> from ackfold.jobs import app_path, entry_points
    >>> "reconcile.py" in entry_points(), app_path("reconcile.py").name
    (True, 'reconcile.py')
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ackfold.errors import AckfoldError

APPS_DIR = Path(__file__).resolve().parent


def entry_points() -> list[str]:
    """The file names of the entry points, e.g. `reconcile.py`."""
    return sorted(p.name for p in APPS_DIR.glob("*.py") if p.name != "__init__.py")


def app_path(app: str) -> Path:
    """The file spark-submit runs for `app`: an entry point of this package by its file
    name (`reconcile.py`), or an absolute path as it is."""
    path = Path(app)
    if path.is_absolute():
        return path
    if app not in entry_points():
        raise ValueError(f"no ackfold entry point {app!r}: one of {', '.join(entry_points())}")
    return APPS_DIR / app


@contextmanager
def one_line_errors() -> Iterator[None]:
    """An entry point's body: an `AckfoldError` ends it as the CLI's one line,
    `ackfold: <what is wrong and the fix>`, on stderr with exit status 1 (`SystemExit`
    with that text), not a traceback (which goes to the `ackfold.jobs` logger at DEBUG).
    spark-submit's output, which the task's log shows, ends with it; a job run in the
    task's process (`run_spark_app`) fails its task with it."""
    try:
        yield
    except AckfoldError as exc:
        logging.getLogger("ackfold.jobs").debug("the job failed", exc_info=exc)
        raise SystemExit(f"ackfold: {exc}") from None
