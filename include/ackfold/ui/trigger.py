"""Trigger a manual DAG (the replay, the retract: `ManualDag`) through Airflow's REST API,
as the logged-in user, and follow the run it created (`run_status`): queued, running, then
what it did or why not.

The call carries the user's own JWT, so Airflow checks the user's right to trigger the
DAG and records the run as theirs. It is made with `httpx.AsyncClient` from an async
endpoint: the api-server serves the inner request on the same event loop meanwhile (a
blocking call from a single-worker server would wait for itself).

Where the call goes is configuration, never the request: Airflow's `[api] base_url` when
it is set, else the api-server's own loopback address (`AirflowApi`). A target built from
the request's `Host` header would send the user's token wherever a caller points it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import httpx

from ackfold.effects.params import MANUAL_RETRACT_DAG_ID
from ackfold.errors import AckfoldError
from ackfold.ledger.schema.values import one_line
from ackfold.replay.params import MANUAL_REPLAY_DAG_ID

TIMEOUT_SECONDS = 30.0
# The most of Airflow's error detail a refusal quotes.
DETAIL_CHARS: Final = 300
UNKNOWN_API: Final = (
    "Airflow's API address is unknown, so no DAG can be triggered from here: set Airflow's "
    "[api] base_url (AIRFLOW__API__BASE_URL) to the address users open Airflow at, e.g. "
    "https://airflow.example.com"
)


# Airflow's run ids (`manual__2026-11-28T14:00:00.123+00:00`, or given over REST).
RUN_ID: Final = re.compile(r"^[\w.:+\-]{1,250}$")
# The run's states in which nothing will change any more.
FINISHED: Final = ("success", "failed")


class TriggerError(AckfoldError):
    """Airflow refused or failed to create the run; `status` is its HTTP status (502 when
    it could not be reached, 503 when its address is unknown)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class AirflowApi:
    """Where the UI reaches Airflow: `base_url` (`[api] base_url`) for the REST call and
    the links to Airflow's pages; without it, `loopback` (the api-server's own address on
    127.0.0.1) for the call and links relative to this server. Neither: replays are
    refused, naming the setting.

    Example:
        >>> AirflowApi(loopback="http://127.0.0.1:8080").link("/dags/x")
        '/dags/x'
        >>> AirflowApi(base_url="https://airflow.example.com/").link("/dags/x")
        'https://airflow.example.com/dags/x'
    """

    base_url: str | None = None
    loopback: str | None = None

    def check(self) -> None:
        """`TriggerError` (503, naming the setting) when the API's address is unknown."""
        if not (self.base_url or self.loopback):
            raise TriggerError(503, UNKNOWN_API)

    @property
    def target(self) -> str:
        """The REST API's base address (`check` first)."""
        self.check()
        return str(self.base_url or self.loopback).rstrip("/")

    def link(self, path: str) -> str:
        """`path` of Airflow's UI as a browser opens it."""
        return f"{self.base_url.rstrip('/')}{path}" if self.base_url else path


@dataclass(frozen=True)
class ManualDag:
    """A DAG the UI triggers as the user: its id, and the task whose return value says
    what a run did (its XCom `return_value`: `sent`, `planned`, `deleted`, ...)."""

    dag_id: str
    task_id: str

    def runs_path(self) -> str:
        """The REST path of the DAG's runs (under `/api/v2`)."""
        return f"/dags/{self.dag_id}/dagRuns"

    def run_link(self, api: AirflowApi, run_id: str) -> str:
        """Run `run_id` in Airflow's UI, as a browser opens it."""
        return api.link(f"/dags/{self.dag_id}/runs/{quote(run_id, safe='')}")


REPLAY_DAG: Final = ManualDag(MANUAL_REPLAY_DAG_ID, "replay")
RETRACT_DAG: Final = ManualDag(MANUAL_RETRACT_DAG_ID, "retract")


@dataclass(frozen=True)
class TriggeredRun:
    run_id: str
    state: str | None
    url: str  # the run in Airflow's UI
    paused: bool = False  # the DAG is paused: the run waits until someone unpauses it


async def trigger_run(
    api: AirflowApi,
    dag: ManualDag,
    token: str,
    conf: dict[str, Any],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> TriggeredRun:
    """POST a run of `dag` with `conf`; the run and its UI link."""
    base = api.target
    url = f"{base}/api/v2{dag.runs_path()}"
    # Airflow 3 needs an explicit null logical date for a run triggered over REST.
    body = {"logical_date": None, "conf": conf}
    try:
        async with httpx.AsyncClient(transport=transport, timeout=TIMEOUT_SECONDS) as client:
            response = await client.post(
                url, json=body, headers={"Authorization": f"Bearer {token}"}
            )
            if response.status_code not in (200, 201):
                raise TriggerError(response.status_code, _detail(response))
            paused = await _paused(client, base, dag, token)
    except httpx.HTTPError as exc:
        fix = "is [api] base_url right?" if api.base_url else "set [api] base_url"
        raise TriggerError(502, f"cannot reach Airflow's API at {base}: {exc} ({fix})") from None
    run = response.json()
    run_id = str(run["dag_run_id"])
    return TriggeredRun(
        run_id=run_id, state=run.get("state"), url=dag.run_link(api, run_id), paused=paused
    )


async def _paused(client: httpx.AsyncClient, base: str, dag: ManualDag, token: str) -> bool:
    """Whether `dag` is paused (a deployment whose DAGs are paused at creation): its runs
    then stay queued. False if Airflow does not say."""
    response = await client.get(
        f"{base}/api/v2/dags/{dag.dag_id}", headers={"Authorization": f"Bearer {token}"}
    )
    if response.status_code != 200:
        return False
    try:
        return response.json().get("is_paused") is True
    except (ValueError, AttributeError):
        return False


def _detail(response: httpx.Response) -> str:
    """Airflow's error message (its `detail`, on one line and cut), else the status line."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    text = detail if isinstance(detail, str) else str(detail) if detail else response.reason_phrase
    return f"Airflow answered {response.status_code}: {one_line(text, DETAIL_CHARS)}"


@dataclass(frozen=True)
class RunStatus:
    """A manual DAG's run as Airflow reports it: `state` is Airflow's (`queued`,
    `running`, `success`, `failed`); `root_ids` the roots it was asked about (its conf);
    `summary` its task's return value once the run succeeded (for a replay `sent`,
    `planned`, `skipped`, `dry_run`, ...)."""

    run_id: str
    state: str
    url: str
    root_ids: tuple[str, ...] = ()
    dry_run: bool | None = None
    summary: dict[str, Any] | None = None
    paused: bool = False

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "state": self.state,
            "finished": self.finished,
            "url": self.url,
            "root_ids": list(self.root_ids),
            "dry_run": self.dry_run,
            "summary": self.summary,
            "paused": self.paused,
        }


async def run_status(
    api: AirflowApi,
    dag: ManualDag,
    token: str,
    run_id: str,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> RunStatus:
    """The state of `dag`'s run `run_id`, and once it succeeded, what it did."""
    base = api.target
    run_path = f"{dag.runs_path()}/{quote(run_id, safe='')}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with httpx.AsyncClient(transport=transport, timeout=TIMEOUT_SECONDS) as client:
            response = await client.get(f"{base}/api/v2{run_path}", headers=headers)
            if response.status_code != 200:
                raise TriggerError(response.status_code, _detail(response))
            run = response.json()
            state = str(run.get("state") or "queued")
            paused = state == "queued" and await _paused(client, base, dag, token)
            summary = None
            if state == "success":
                xcom = await client.get(
                    f"{base}/api/v2{run_path}/taskInstances/{dag.task_id}/xcomEntries/return_value",
                    headers=headers,
                )
                if xcom.status_code == 200:
                    summary = _value(xcom.json().get("value"))
    except httpx.HTTPError as exc:
        raise TriggerError(502, f"cannot reach Airflow's API at {base}: {exc}") from None
    conf = run.get("conf")
    conf = conf if isinstance(conf, dict) else {}
    ids = conf.get("root_ids")
    ids = ids if isinstance(ids, list) else []
    dry_run = conf.get("dry_run")
    return RunStatus(
        run_id=run_id,
        state=state,
        url=dag.run_link(api, run_id),
        root_ids=tuple(str(i) for i in ids),
        dry_run=dry_run if isinstance(dry_run, bool) else None,
        summary=summary,
        paused=paused,
    )


def _value(raw: Any) -> dict[str, Any] | None:
    """An XCom value as Airflow's API returns it: the object, or its JSON text."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    return raw if isinstance(raw, dict) else None
