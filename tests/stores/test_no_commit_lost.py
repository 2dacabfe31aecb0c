"""No commit lost, whoever writes at once (invariant 14), on GCS and ADLS: three producers
in their own processes, maintenance and replays at once, a producer SIGKILLed mid-write,
and the store restarted (`tests/object_store_ledger.py`).

No JVM here: the tracked Spark app that writes beside them on the S3 API
(tests/s3/test_no_commit_lost.py) commits through delta-rs as the producers do, and a
tracked app's commit on each of these stores is tests/stores/test_spark.py's. On each
store it cost a JVM streaming all through the run, the longest tests of the tier."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.object_store_ledger import lose_nothing
from tests.stores.conftest import KINDS, new_store


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_producers_replays_maintenance_a_kill_and_a_restart_lose_nothing(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = new_store(kind, tmp_path / kind)
    for key, value in server.env().items():  # set back when the test ends
        monkeypatch.setenv(key, value)
    # Azurite keeps what it answered across a stop, not across a SIGKILL (its metadata is
    # saved every 5 s): it is stopped; the GCS emulator keeps objects in files: killed.
    warehouse = server.warehouse("no-commit-lost")
    lose_nothing(tmp_path, server, warehouse, kill=kind == "gcs", spark_app=False)
