"""The starter app of `spark_apps/`, as a team copies it: a folder of orders through its
tracked query on the tier's Spark session, then a reconcile that tells the order with a
quantity (completed) from the one without (failed, with the app's reason); and a failed
order replayed through the files sender into the inbox, read by the next run as its new
attempt."""

from __future__ import annotations

import runpy
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from ackfold import StageTracker
from ackfold.config import Settings
from ackfold.ledger.schema import ids, status
from ackfold.replay.request import ReplayRequest
from ackfold.replay.senders import GROUP
from ackfold.runs.reconcile import reconcile
from ackfold.runs.replay import run_replay
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


@pytest.fixture
def files_sender(tmp_path: Path) -> Iterator[None]:
    """The files sender registered as a team registers it: an `ackfold.senders` entry
    point of an installed distribution (a dist-info folder on `sys.path`, this test only)."""
    site = tmp_path / "site"
    info = site / "orders_app-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: orders-app\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\nfiles = ackfold.sources.files:FilesInbox\n")
    sys.path.insert(0, str(site))
    try:
        yield
    finally:
        sys.path.remove(str(site))


def test_a_failed_order_of_the_starter_app_replays_through_the_inbox_and_completes(
    spark: Any, make_settings: Callable[..., Settings], tmp_path: Path, files_sender: None
) -> None:
    settings = make_settings(
        spark={"master": "local[2]", "shuffle_partitions": 2}, engine={"kind": "embedded"}
    )
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "orders.json").write_text('{"id": "o-1", "qty": 2}\n{"id": "o-2", "qty": 0}\n')
    app = runpy.run_path(str(PROJECT_DIR / "spark_apps" / "starter.py"))
    app["run"](spark, settings, str(inbox), app="orders", continuous=False)
    # o-3's first attempt failed for a reason of the moment (its store was down), in the
    # starter's own stage: registered as the starter registers, with its payload.
    store = StageTracker("orders", "store", ledger=settings.table_root)
    batch = spark.createDataFrame([("o-3", 5)], "id string, qty int")
    first = store.spout(
        batch, message_id="id", source="files", source_queue=str(inbox),
        payload=F.to_json(F.struct("id", "qty")),
    )  # fmt: skip
    store.write_batch(
        None, roots=first.roots, events=[first.events, store.fail(first.tuples, "down")]
    )
    reconcile(spark, settings, app="orders")
    failed = {r.source_message_id: r.root_id for r in roots_of(spark, settings)}
    assert set(failed) == {"o-1", "o-2", "o-3"}

    asked = ReplayRequest(root_ids=(failed["o-2"], failed["o-3"]), requested_by="test")
    summary = run_replay(settings, asked)
    assert (summary.sent, summary.dead_lettered) == (2, 0)
    news = {m: ids.root_id("orders", "", 2, failed[m]) for m in ("o-2", "o-3")}
    assert sorted(p.name for p in inbox.iterdir()) == sorted(
        ["orders.json", *(f"replay-{ids.format_id(r)}.json" for r in news.values())]
    )

    # The next run reads only the replayed files: each is attempt 2 of its order's root.
    app["run"](spark, settings, str(inbox), app="orders", continuous=False)
    reconcile(spark, settings, app="orders")
    again = {r.root_id: r for r in roots_of(spark, settings) if r.attempt == 2}
    assert {r: (again[r].attempt, again[r].origin_root_id) for r in news.values()} == {
        news["o-2"]: (2, failed["o-2"]),
        news["o-3"]: (2, failed["o-3"]),
    }
    state = {
        r.root_id: r.status
        for r in spark.read.format("delta").load(f"{settings.table_root}/root_state").collect()
    }
    assert state[failed["o-2"]] == state[failed["o-3"]] == status.REPLAYED
    assert state[news["o-3"]] == status.COMPLETED  # its store is back
    assert state[news["o-2"]] == status.FAILED  # still no quantity: it replays again
    stored = spark.read.format("delta").load(f"{settings.table_root}/orders")
    assert sorted(row.id for row in stored.collect()) == ["o-1", "o-3"]


def roots_of(spark: Any, settings: Settings) -> list[Any]:
    return list(spark.read.format("delta").load(f"{settings.table_root}/roots").collect())
