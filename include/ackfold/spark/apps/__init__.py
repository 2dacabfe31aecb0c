"""Deprecated: the spark-submit entry points are `ackfold.jobs` (`app_path`,
`entry_points`, `APPS_DIR`). This name answers until the next minor release, with a
`DeprecationWarning`; the entry points' files are only in `ackfold/jobs/`."""

from __future__ import annotations

import warnings
from typing import Any

_MOVED = ("APPS_DIR", "app_path", "entry_points")


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module 'ackfold.spark.apps' has no attribute {name!r}")
    warnings.warn(
        f"ackfold.spark.apps.{name} moved to ackfold.jobs.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    from ackfold import jobs

    return getattr(jobs, name)
