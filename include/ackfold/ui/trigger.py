"""Trigger the manual replay DAG through Airflow's REST API, as the logged-in user.

The call carries the user's own JWT, so Airflow checks the user's right to trigger the
DAG and records the run as theirs. It is made with `httpx.AsyncClient` from an async
endpoint: the api-server serves the inner request on the same event loop meanwhile (a
blocking call from a single-worker server would wait for itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from ackfold.replay.params import MANUAL_REPLAY_DAG_ID

TIMEOUT_SECONDS = 30.0


class TriggerError(Exception):
    """Airflow refused or failed to create the run; `status` is its HTTP status (502 when
    it could not be reached)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class TriggeredRun:
    run_id: str
    state: str | None
    url: str  # the run in Airflow's UI


async def trigger_manual_replay(
    api_base: str,
    token: str,
    conf: dict[str, Any],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> TriggeredRun:
    """POST a run of the manual replay DAG with `conf`; the run and its UI link."""
    base = api_base.rstrip("/")
    url = f"{base}/api/v2/dags/{MANUAL_REPLAY_DAG_ID}/dagRuns"
    # Airflow 3 needs an explicit null logical date for a run triggered over REST.
    body = {"logical_date": None, "conf": conf}
    try:
        async with httpx.AsyncClient(transport=transport, timeout=TIMEOUT_SECONDS) as client:
            response = await client.post(
                url, json=body, headers={"Authorization": f"Bearer {token}"}
            )
    except httpx.HTTPError as exc:
        raise TriggerError(502, f"cannot reach Airflow's API at {base}: {exc}") from None
    if response.status_code not in (200, 201):
        raise TriggerError(response.status_code, _detail(response))
    run = response.json()
    run_id = str(run["dag_run_id"])
    return TriggeredRun(
        run_id=run_id,
        state=run.get("state"),
        url=f"{base}/dags/{MANUAL_REPLAY_DAG_ID}/runs/{quote(run_id, safe='')}",
    )


def _detail(response: httpx.Response) -> str:
    """Airflow's error message (its `detail`), else the status line."""
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    text = detail if isinstance(detail, str) else str(detail) if detail else response.reason_phrase
    return f"Airflow answered {response.status_code}: {text}"
