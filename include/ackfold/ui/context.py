"""What the Reliability UI's routes share within one app: the settings they read, the
site, the CSRF guard, the link signer, Airflow's address, the redactor and the viewer
dependency.

`create_app` (`ackfold.ui.app`) builds one `UiContext`; each group of routes
(`ledger_pages`, `quality_pages`, `replay_pages`) takes it and returns its router.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request

from ackfold.config import Settings
from ackfold.config.sections import UiSettings
from ackfold.ui.filters import Params
from ackfold.ui.queries import UiReader
from ackfold.ui.redact import Redactor
from ackfold.ui.security import CsrfGuard, LinkSigner, Viewer
from ackfold.ui.site import Site
from ackfold.ui.trigger import AirflowApi

# Resolves the logged-in user of a request, or raises 401/403 (FastAPI calls it).
ViewerDependency = Callable[..., Awaitable[Viewer]]


@dataclass(frozen=True)
class UiContext:
    """One app's shared parts. `settings` gives each app's policy (its timeout, for the
    time to detect); `transport` is for tests (an `httpx.AsyncBaseTransport` standing in
    for Airflow)."""

    ui: UiSettings
    warehouse: str
    docs_dir: Path
    apps: tuple[str, ...]
    guard: CsrfGuard
    signer: LinkSigner
    site: Site
    airflow: AirflowApi
    redactor: Redactor
    viewer: ViewerDependency
    transport: Any = None
    settings: Settings | None = None

    def reader(self) -> UiReader:
        """A reader of the ledger: one per request, a fresh snapshot of the tables."""
        return UiReader(self.warehouse)


def query(request: Request) -> Params:
    """The request's query parameters, each with every value given."""
    return Params({k: request.query_params.getlist(k) for k in request.query_params})
