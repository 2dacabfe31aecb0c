"""No commit lost, whoever writes at once (invariant 14), on the local S3 API: producers in
their own processes, a tracked Spark app, maintenance and replays at once, a producer
SIGKILLed mid-write and the S3 server SIGKILLed and restarted (`tests/object_store_ledger.py`)."""

from __future__ import annotations

from pathlib import Path

from ackfold_dev.s3 import LocalS3
from tests.object_store_ledger import lose_nothing


def test_producers_a_spark_app_replays_maintenance_a_kill_and_a_restart_lose_nothing(
    tmp_path: Path, s3_env: dict[str, str]
) -> None:
    server = LocalS3(tmp_path / "s3", bucket="no-commit-lost")
    lose_nothing(tmp_path, server, "s3a://no-commit-lost/warehouse")
