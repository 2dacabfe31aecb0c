"""The Airflow assets of ackfold: the `root_state` table, which each reconcile updates and
whose update triggers the replay and the quality checks, and each tracked app's own
asset, which a successful run of its DAG updates and which triggers the reconcile."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from ackfold.config import Settings, load_settings
from ackfold.config.values import APP_DAG_PREFIX

if TYPE_CHECKING:
    from airflow.sdk import Asset

ROOT_STATE_ASSET_NAME: Final = "ackfold_root_state"


def root_state_asset(settings: Settings | None = None) -> Asset:
    """The `root_state` table as an Airflow asset: `ackfold_reconcile` updates it, and each
    update triggers `ackfold_replay`. Its URI is the table's location (`file://` for a
    local warehouse; Airflow keeps other schemes, such as `s3a://`, as they are)."""
    from airflow.sdk import Asset

    from ackfold.ledger.schema.tables import ROOT_STATE, Ledger

    settings = settings or load_settings()
    path = Ledger(settings.table_root).path(ROOT_STATE)
    uri = path if "://" in path else Path(path).as_uri()
    return Asset(name=ROOT_STATE_ASSET_NAME, uri=uri, group="ackfold")


def app_asset(app: str) -> Asset:
    """What a successful run of `ackfold_app_<app>` updates: the asset of the same name."""
    from airflow.sdk import Asset

    return Asset(name=f"{APP_DAG_PREFIX}{app}", group="ackfold")
