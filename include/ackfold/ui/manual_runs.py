"""What the replay and retract pages share: a manual DAG triggered as the viewer
(`trigger_as`), the page its run starts on (`queued`), the run followed (`follow`), and a
JSON request's body read safely (`json_body`).

The DAG is one of `trigger.ManualDag`; Airflow's address is the configured one
(`UiContext.airflow`), never the request's; the call carries the viewer's own token, so
Airflow checks their right to trigger the DAG and records the run as theirs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from fastapi import HTTPException

from ackfold.ui.context import UiContext
from ackfold.ui.filters import FieldError
from ackfold.ui.security import Viewer
from ackfold.ui.trigger import (
    RUN_ID,
    ManualDag,
    RunStatus,
    TriggeredRun,
    run_status,
    trigger_run,
)

# A request body names at most `ui.replay_max_roots` ids or one filter: far below these.
MAX_BODY_BYTES: Final = 1 << 20
MAX_BODY_DEPTH: Final = 8


async def trigger_as(
    ctx: UiContext, dag: ManualDag, who: Viewer, conf: dict[str, Any]
) -> TriggeredRun:
    """Trigger `dag` with `conf` (checked by the caller) as `who`; 401 without their
    Airflow token. The DAG records who asked: Airflow's triggering user, i.e. `who`."""
    if who.token is None:
        raise HTTPException(
            401, f"no Airflow token to trigger the {dag.task_id} with: log in again"
        )
    return await trigger_run(ctx.airflow, dag, who.token, conf, transport=ctx.transport)


def queued(run: TriggeredRun, root_ids: Sequence[str], dry_run: bool) -> RunStatus:
    """The run as Airflow said at creation (queued): nothing is done until it runs."""
    return RunStatus(
        run_id=run.run_id,
        state=run.state or "queued",
        url=run.url,
        root_ids=tuple(root_ids),
        dry_run=dry_run,
        paused=run.paused,
    )


async def follow(ctx: UiContext, dag: ManualDag, who: Viewer, run_id: str) -> RunStatus:
    """`dag`'s run `run_id` as Airflow reports it now, asked with `who`'s token: 400 for
    what is no run id, 503 while Airflow's address is unknown, 401 without a token."""
    if not RUN_ID.match(run_id):
        raise FieldError("run_id", "not an Airflow run id")
    ctx.airflow.check()
    if who.token is None:
        raise HTTPException(401, "no Airflow token to ask about the run with: log in again")
    return await run_status(ctx.airflow, dag, who.token, run_id, transport=ctx.transport)


def json_body(raw: bytes) -> dict[str, Any]:
    """A request's body as a JSON object; `FieldError` (400) for anything else: too
    long, not UTF-8, not JSON, nested past what a request needs, numbers of thousands
    of digits (Python's limit on converting text to integers raises `ValueError`)."""
    if len(raw) > MAX_BODY_BYTES:
        raise FieldError("body", f"longer than {MAX_BODY_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FieldError("body", "not UTF-8 text: send JSON encoded as UTF-8") from None
    depth = max_depth(text)
    if depth > MAX_BODY_DEPTH:
        raise FieldError("body", f"nested {depth} levels deep: at most {MAX_BODY_DEPTH}")
    try:
        body = json.loads(text)
    except (ValueError, RecursionError) as exc:
        # JSONDecodeError is a ValueError; its message names the line and column.
        where = (
            f" ({exc.msg} at line {exc.lineno} column {exc.colno})"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        raise FieldError("body", f"not valid JSON{where}") from None
    if not isinstance(body, dict):
        raise FieldError("body", "must be a JSON object")
    return body


def max_depth(text: str) -> int:
    """How deeply brackets nest in JSON `text` (brackets inside strings counted too: an
    over-estimate that only refuses bodies no request needs)."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
