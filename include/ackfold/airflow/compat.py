"""The Airflow names whose home moved between 3.0 and 3.3, found in one place.

ackfold supports Airflow 3.0 to 3.3 (`tests/install` runs each minor). Airflow 3.2 moved
`CronTriggerTimetable` and `AssetOrTimeSchedule` into `airflow.sdk`, 3.1 and 3.2 moved
the exceptions into `airflow.sdk.exceptions`, and `airflow.sdk.BaseHook` is 3.1's. Each
function returns the public name where this Airflow has it: the SDK's first, else its
3.0 home. Airflow is imported inside them, when a DAG or a task needs it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any


def _first(name: str, *modules: str) -> Any:
    """`name` from the first of `modules` that has it."""
    for module in modules:
        found = getattr(import_module(module), name, None)
        if found is not None:
            return found
    raise ImportError(f"no {name} in {', '.join(modules)}: is this Airflow 3.0 or later?")


def cron_trigger_timetable() -> Any:
    """`CronTriggerTimetable` (in `airflow.sdk` since 3.2)."""
    return _first("CronTriggerTimetable", "airflow.sdk", "airflow.timetables.trigger")


def asset_or_time_schedule() -> Any:
    """`AssetOrTimeSchedule` (in `airflow.sdk` since 3.2)."""
    return _first("AssetOrTimeSchedule", "airflow.sdk", "airflow.timetables.assets")


def base_hook() -> Any:
    """`BaseHook` (in `airflow.sdk` since 3.1)."""
    return _first("BaseHook", "airflow.sdk", "airflow.hooks.base")


def _exception(name: str) -> type[Exception]:
    found = _first(name, "airflow.sdk.exceptions", "airflow.exceptions")
    assert isinstance(found, type)
    assert issubclass(found, Exception)
    return found


def fail_exception() -> type[Exception]:
    """`AirflowFailException`: fails a task at once, without its retries."""
    return _exception("AirflowFailException")


def not_found_exception() -> type[Exception]:
    """`AirflowNotFoundException`: no such connection."""
    return _exception("AirflowNotFoundException")


def airflow_exception() -> type[Exception]:
    """`AirflowException`: fails a try of a task."""
    return _exception("AirflowException")
