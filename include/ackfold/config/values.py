"""The value types of ackfold's settings: durations, cron schedules, replay rates, and
`Section`, the base of every settings section (unknown keys are errors, values are frozen)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def _parse_duration(value: Any) -> Any:
    # Users write "90s", "5m", "1h"; a bare number means seconds.
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(
                f"{value!r} is not a duration: use a number of seconds or 90s, 5m, 1h, 2d"
            )
        return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    return value


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be positive")
    return value


Duration = Annotated[timedelta, BeforeValidator(_parse_duration), AfterValidator(_positive)]

# Below one message every 10 s, a replay would hold the ledger lock for days; above
# 100,000 a second, no queue keeps up.
MIN_RATE: Final = 0.1
MAX_RATE: Final = 100_000.0


def _rate(value: float) -> float:
    # A comparison, not float(): NaN fails it.
    if not MIN_RATE <= value <= MAX_RATE:
        raise ValueError(
            f"must be from {MIN_RATE:g} to {MAX_RATE:,.0f} messages per second, got {value}"
        )
    return value


# Messages per second, in the range `ackfold replay --rate` and the manual replay take.
Rate = Annotated[float, AfterValidator(_rate)]

_PRESETS = ("@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly")
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-?LW#]+$")


def _schedule(value: str) -> str:
    # Airflow parses the cron itself; this catches the typos that would otherwise surface
    # as a DAG import error in the UI rather than at start-up.
    fields = value.split()
    if value in _PRESETS or (len(fields) == 5 and all(_CRON_FIELD.match(f) for f in fields)):
        return value
    raise ValueError(
        f"{value!r} is not a schedule: use a 5-field cron such as '*/5 * * * *' or one of "
        + ", ".join(_PRESETS)
    )


Schedule = Annotated[str, AfterValidator(_schedule)]

# A plain app name: it becomes part of checkpoint paths and of its DAG's id.
APP_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")
# An app's DAG and its Airflow asset: `ackfold_app_<app>` (the demo triggers its DAG).
APP_DAG_PREFIX: Final = "ackfold_app_"


class Section(BaseModel):
    """A settings section: unknown keys are errors, and values cannot change."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def seconds_text(value: timedelta) -> str:
    """A duration as settings take it back, e.g. `90s`, for messages."""
    return f"{value.total_seconds():g}s"
