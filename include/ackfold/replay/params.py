"""A manual replay request as the `ackfold_manual_replay` DAG takes it: a run conf.

The DAG's Params form checks the conf's JSON types, but a run can also be triggered over
the REST API with any conf, so the run checks it again here, field by field, before it
touches the ledger. The UI plugin calls the same functions to check a selection before it
triggers the DAG. Only typed values come out (ints, datetimes, a tuple of known
statuses): nothing here is ever pasted into SQL.

A conf has these keys, every one optional:

- `root_ids`: array of strings, decimal or `0x` hex root ids (strings: a JavaScript
  number loses the low bits of a 64-bit id);
- `app`: one of the configured apps (`apps.*`), or null for any;
- `statuses`: array of `failed`, `timed_out`, `dead_lettered`; default failed, timed_out;
- `since`, `until`: ISO-8601 strings (1970 to 2200) or null: the status changed in
  [since, until);
- `limit`: integer from 1 to 10,000,000, or null: at most this many roots;
- `rate`: number from 0.1 to 100,000, or null: messages per second; default the app's
  `replay_rate`;
- `dry_run`: boolean, default **true**: plan and log, send nothing.

A request that names no root, no app and no time range selects every failed root of every
app: it may be sent only with a `limit` (a dry run needs none), so that nobody replays a
whole ledger by pressing a button with the defaults.

Example:
    >>> request = parse_replay_conf(
    ...     {"root_ids": ["0x000000000000002a"], "dry_run": False}, apps=["wordcount"]
    ... )
    >>> request.root_ids, request.dry_run, request.requested_by
    ((42,), False, 'airflow')
    >>> conf_from_request(request)["root_ids"]
    ['0x000000000000002a']
    >>> parse_replay_conf({"limit": 0, "sttuses": []}, apps=[])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ackfold.replay.params.ReplayParamsError: invalid manual replay request (sttuses, limit):
      sttuses: not a manual replay setting (did you mean statuses?)...
      limit: must be from 1 to 10,000,000 roots, got 0

The bounds (times, limit, rate) are the library's, `ackfold.ledger.reading.parse`: the CLI, the
UI and the configuration take the same ranges.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from ackfold.errors import ParamsError
from ackfold.ledger.reading.parse import (
    MAX_LIMIT,
    QueryError,
    parse_limit,
    parse_rate,
    parse_root_id,
    parse_time,
)
from ackfold.ledger.schema import ids
from ackfold.replay.request import DEFAULT_STATUSES, REPLAYABLE, ReplayRequest

MANUAL_REPLAY_DAG_ID: Final = "ackfold_manual_replay"
CONF_KEYS: Final = ("root_ids", "app", "statuses", "since", "until", "limit", "rate", "dry_run")
# Every root id is written into each replay_log row's `request` column: beyond this many,
# select by app, status and time range instead.
MAX_ROOT_IDS: Final = 1000
_TIME_EXAMPLE: Final = "2026-11-22T10:00:00Z"


class ReplayParamsError(ParamsError):
    """A manual replay conf is invalid: the message lists every bad field and its fix."""

    what = "manual replay request"


def parse_replay_conf(
    conf: Mapping[str, Any], *, apps: Sequence[str], requested_by: str = "airflow"
) -> ReplayRequest:
    """The `ReplayRequest` a run conf asks for; `ReplayParamsError` names every bad field.

    Missing keys take the form's defaults (`dry_run` true); null means "no filter".
    """
    fields, problems = parse_fields(conf, keys=CONF_KEYS, apps=apps, what="manual replay")
    if problems:
        raise ReplayParamsError(problems)
    return ReplayRequest(**fields, requested_by=requested_by)


def parse_fields(
    conf: Mapping[str, Any], *, keys: Sequence[str], apps: Sequence[str], what: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The typed fields of a run conf that may hold `keys` (of `CONF_KEYS`), and per bad
    field why: the selection a manual replay and a manual retract (`ackfold.effects.params`,
    `what` in the messages) share. Missing keys take the defaults (`dry_run` true)."""
    problems: dict[str, str] = {}
    for key in conf:
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems[str(key)] = f"not a {what} setting{hint}; the settings are {', '.join(keys)}"

    def field(key: str, parse: Callable[[Any], Any], default: Any = None) -> Any:
        value = conf.get(key)
        if value is None:
            return default
        try:
            return parse(value)
        except (QueryError, ValueError, TypeError, ArithmeticError) as exc:
            # The shared parsers name the field first: it is already the line's key.
            problems[key] = str(exc).removeprefix(f"{key} ")
            return default

    parsers: dict[str, tuple[Callable[[Any], Any], Any]] = {
        "root_ids": (_root_ids, ()),
        "app": (lambda value: _app(value, apps), None),
        "statuses": (_statuses, DEFAULT_STATUSES),
        "since": (lambda value: _time(value, "since"), None),
        "until": (lambda value: _time(value, "until"), None),
        "limit": (_limit, None),
        "rate": (_rate, None),
        "dry_run": (_boolean, True),
    }
    fields = {key: field(key, *parsers[key]) for key in keys}
    since, until = fields.get("since"), fields.get("until")
    if since and until and since >= until:
        problems["until"] = f"must be after since ({since.isoformat()}), got {until.isoformat()}"
    unbounded = not any(fields.get(k) for k in ("root_ids", "app", "since", "until", "limit"))
    if unbounded and not fields["dry_run"] and not problems:
        verb = "replays every failed root" if "statuses" in keys else "retracts every dead letter"
        problems["limit"] = (
            f"a request without root_ids, app, since or until {verb} of "
            "every app: set a limit (or narrow it, or make it a dry run first)"
        )
    return fields, problems


def conf_from_request(request: ReplayRequest) -> dict[str, Any]:
    """The run conf that asks for `request`: JSON-ready, root ids as ackfold shows them
    (`0x` and 16 hex digits: `ackfold.ledger.schema.ids.format_id`).

    `parse_replay_conf` of it gives `request` back (with the caller's `requested_by`).
    """
    if request.automatic:
        raise ValueError("an automatic replay follows each app's policy: it has no manual conf")
    return {
        "root_ids": [ids.format_id(root_id) for root_id in request.root_ids],
        "app": request.app,
        "statuses": list(request.statuses),
        "since": request.since.isoformat() if request.since else None,
        "until": request.until.isoformat() if request.until else None,
        "limit": request.limit,
        "rate": request.rate,
        "dry_run": request.dry_run,
    }


def _root_ids(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list | tuple):
        raise ValueError('must be a list of root ids, as strings (e.g. ["-42", "0x2a"])')
    if len(value) > MAX_ROOT_IDS:
        raise ValueError(
            f"{len(value)} root ids is more than {MAX_ROOT_IDS}: select by app, statuses and "
            "since/until instead"
        )
    parsed: list[int] = []
    bad: list[str] = []
    for item in value:
        if not isinstance(item, str):
            # A JSON number may already have lost the id's low bits in a browser.
            bad.append(f"{item!r} is not a string: give root ids as strings")
            continue
        try:
            root_id = parse_root_id(item)
        except QueryError as exc:
            bad.append(str(exc))
            continue
        if root_id not in parsed:
            parsed.append(root_id)
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise ValueError("; ".join(bad[:3]) + more)
    return tuple(parsed)


def _app(value: Any, apps: Sequence[str]) -> str:
    known = ", ".join(sorted(apps)) or "none configured"
    if not isinstance(value, str) or value not in apps:
        raise ValueError(f"{value!r} is not a configured app: use one of {known}, or null for any")
    return value


def _statuses(value: Any) -> tuple[str, ...]:
    valid = ", ".join(REPLAYABLE)
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(f"must be a non-empty list of statuses, of {valid}")
    unknown = [s for s in value if s not in REPLAYABLE]
    if unknown:
        raise ValueError(f"cannot replay {', '.join(map(repr, unknown))}: choose from {valid}")
    return tuple(dict.fromkeys(value))


def _time(value: Any, key: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"must be an ISO-8601 time string, e.g. {_TIME_EXAMPLE}, or null")
    return parse_time(value, key)


def _limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"must be a whole number of roots from 1 to {MAX_LIMIT:,}, or null; got {value!r}"
        )
    return parse_limit(value, "limit")


def _rate(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number of messages per second, or null; got {value!r}")
    return parse_rate(value, "rate")


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false; got {value!r}")
    return value
