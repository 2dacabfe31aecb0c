"""The starter app of `spark_apps/`, as a team copies it: a folder of orders through its
tracked query on the tier's Spark session, then a reconcile that tells the order with a
quantity (completed) from the one without (failed, with the app's reason)."""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ackfold.config import Settings
from ackfold.reconcile import reconcile
from tests.conftest import PROJECT_DIR


def test_the_starter_app_tracks_each_order_to_completed_or_failed(
    spark: Any, make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings(spark={"master": "local[2]", "shuffle_partitions": 2})
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "orders.json").write_text('{"id": "o-1", "qty": 2}\n{"id": "o-2", "qty": 0}\n')
    app = runpy.run_path(str(PROJECT_DIR / "spark_apps" / "starter.py"))
    app["run"](spark, settings, str(inbox), app="orders", continuous=False)
    assert reconcile(spark, settings, app="orders")["by_status"] == {"completed": 1, "failed": 1}
    failed = spark.read.format("delta").load(f"{settings.table_root}/root_state")
    assert [row.fail_reason for row in failed.where("status = 'failed'").collect()] == [
        "no quantity"
    ]
    stored = spark.read.format("delta").load(f"{settings.table_root}/orders")
    assert [row.id for row in stored.collect()] == ["o-1"]
