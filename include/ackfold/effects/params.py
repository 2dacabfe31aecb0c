"""A manual retract request as the `ackfold_manual_retract` DAG and the root page's button
take it: a run conf, checked field by field with the manual replay's own parsers
(`ackfold.replay.params.parse_fields`), so both select roots alike. Only typed values come
out: nothing here is ever pasted into SQL.

A conf has these keys, every one optional: `root_ids` (array of strings, decimal or `0x`
hex), `app`, `since`, `until` (ISO-8601 strings: dead-lettered in [since, until)),
`limit` (1 to 10,000,000), `dry_run` (boolean, default **true**: show, delete nothing).
A request that names no root, no app and no time range may delete only with a `limit`.

Example:
    >>> request = parse_retract_conf({"root_ids": ["0x2a"], "dry_run": False}, apps=[])
    >>> request.root_ids, request.dry_run, request.requested_by
    ((42,), False, 'airflow')
    >>> conf_from_retract(request)["root_ids"]
    ['0x000000000000002a']
    >>> parse_retract_conf({"rate": 5}, apps=[])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ackfold.effects.errors.RetractParamsError: invalid retract request (rate):
      rate: not a retract setting...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ackfold.effects.errors import RetractParamsError
from ackfold.effects.plans import RetractRequest
from ackfold.ledger.schema import ids
from ackfold.replay.params import parse_fields

MANUAL_RETRACT_DAG_ID: Final = "ackfold_manual_retract"
RETRACT_CONF_KEYS: Final = ("root_ids", "app", "since", "until", "limit", "dry_run")


def parse_retract_conf(
    conf: Mapping[str, Any], *, apps: Sequence[str], requested_by: str = "airflow"
) -> RetractRequest:
    """The `RetractRequest` a run conf asks for; `RetractParamsError` names every bad field.
    `apps`: the configured apps (`app` must be one of them)."""
    fields, problems = parse_fields(conf, keys=RETRACT_CONF_KEYS, apps=apps, what="retract")
    if problems:
        raise RetractParamsError(problems)
    return RetractRequest(**fields, requested_by=requested_by)


def conf_from_retract(request: RetractRequest) -> dict[str, Any]:
    """The run conf that asks for `request`, JSON-ready: `parse_retract_conf` of it gives
    `request` back (with the caller's `requested_by`)."""
    return {
        "root_ids": [ids.format_id(root_id) for root_id in request.root_ids],
        "app": request.app,
        "since": request.since.isoformat() if request.since else None,
        "until": request.until.isoformat() if request.until else None,
        "limit": request.limit,
        "dry_run": request.dry_run,
    }
