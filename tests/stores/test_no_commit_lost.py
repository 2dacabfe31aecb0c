"""No commit lost, whoever writes at once (invariant 14), on GCS and ADLS: producers in
their own processes, a tracked Spark app, maintenance and replays at once, a producer
SIGKILLed mid-write, and the store restarted (`tests/object_store_ledger.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.object_store_ledger import lose_nothing
from tests.stores.conftest import KINDS, new_store


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_producers_a_spark_app_replays_maintenance_a_kill_and_a_restart_lose_nothing(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = new_store(kind, tmp_path / kind)
    for key, value in server.env().items():  # set back when the test ends
        monkeypatch.setenv(key, value)
    # Azurite keeps what it answered across a stop, not across a SIGKILL (its metadata is
    # saved every 5 s): it is stopped; the GCS emulator keeps objects in files: killed.
    lose_nothing(tmp_path, server, server.warehouse("no-commit-lost"), kill=kind == "gcs")
