"""The two replay engines agree: on one ledger, the Spark planner and the embedded one
(DuckDB over delta-rs) give the same plan for every kind of request (the same sends, in
the same order, with the same decisions and states, and the same skips and reasons), and
their bookkeeping leaves the same `root_state` and `dead_letters`."""

from __future__ import annotations

import shutil
from dataclasses import asdict
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits.fence import Fence, holding
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import DEAD_LETTERS, ROOT_STATE, Ledger
from ackfold.replay.bookkeeping import PLANNED, SparkBookkeeper
from ackfold.replay.embedded_books import EmbeddedBookkeeper
from ackfold.replay.planner import Plan
from ackfold.replay.request import ReplayRequest
from ackfold.replay.senders import no_sender_reason
from ackfold.runs.replayer import Replayer
from ackfold.sources.base import Sent
from tests.replay_ledger import T0, Failed, read_table, write_failed

NOW = T0 + timedelta(hours=1)


def ledger_of(tmp_path: Path, name: str) -> Settings:
    return load_settings(
        var_dir=tmp_path / "var",
        warehouse=str(tmp_path / name),
        defaults={"replay_backoff": "60s", "max_attempts": 3},
        apps={"clicks": {"replay_backoff": "10s", "max_attempts": 5}},
    )


def every_case() -> list[Failed]:
    """Each decision a plan can make, several times over, with ties in time."""
    roots = []
    for n in range(60):
        kind = n % 10
        changed = NOW - timedelta(seconds=(n * 37) % 400)
        app = "clicks" if n % 3 == 0 else "orders"
        roots.append(
            Failed(
                n,
                app=app,
                status=[status.FAILED, status.TIMED_OUT, status.DEAD_LETTERED, status.COMPLETED,
                        status.PENDING, status.REPLAYED][n % 6],
                attempt=1 + n % 5,
                changed_at=changed if kind else T0,
                payload=None if kind == 7 else "default",
                registered=kind != 8,
                source="file" if kind == 9 else "sqs",
                first_event_at=T0 - timedelta(days=n % 3),
            )
        )  # fmt: skip
    return roots


REQUESTS = {
    "automatic": ReplayRequest(automatic=True, requested_by="t"),
    "automatic, one app, a limit": ReplayRequest(
        automatic=True, app="clicks", limit=4, requested_by="t"
    ),
    "manual, the defaults": ReplayRequest(requested_by="t"),
    "manual, dead letters in a time range": ReplayRequest(
        statuses=(status.DEAD_LETTERED,),
        since=NOW - timedelta(seconds=300),
        until=NOW - timedelta(seconds=30),
        requested_by="t",
    ),
    "manual, by root id": ReplayRequest(root_ids=(), requested_by="t"),  # ids set below
}


def comparable(plan: Plan) -> dict[str, Any]:
    """A plan without its random id, times in UTC (Spark hands back naive UTC times)."""
    sends = []
    for p in plan.sends:
        row = asdict(p)
        at = row["planned_at"]
        if at is not None:
            row["planned_at"] = at if at.tzinfo else at.replace(tzinfo=UTC)
        sends.append(row)
    return {"selected": plan.selected, "sends": sends, "skipped": plan.skipped}


def test_both_engines_plan_alike_and_settle_alike(spark: SparkSession, tmp_path: Path) -> None:
    one = ledger_of(tmp_path, "one")
    roots = every_case()
    ids = write_failed(one.table_root, roots)
    requests = dict(REQUESTS)
    requests["manual, by root id"] = ReplayRequest(
        root_ids=tuple(ids[::4]), statuses=(status.FAILED,), requested_by="t"
    )
    embedded = Replayer(None, one, now=NOW)
    on_spark = Replayer(spark, one, now=NOW)
    assert (embedded.engine.name, on_spark.engine.name) == ("embedded", "spark")
    first = embedded.plan(requests["automatic"])
    assert len(first.sends) > 10, "a plan with every decision"
    assert len(first.skipped) >= 2
    # A root whose source has no sender ("file") is dead-lettered at once, not skipped.
    assert any(p.reason == no_sender_reason("file") for p in first.sends)
    # An earlier run planned some sends, and marked a few of them sent.
    books = EmbeddedBookkeeper(Ledger(one.table_root))
    with holding(Fence(one.table_root, epoch=1)):  # a leased run's commits
        books.append_log(first, first.sends[:8], PLANNED)
        books.mark(first, first.sends[:3], {p.root_id: Sent(p.root_id, "m") for p in first.sends})

    for name, request in requests.items():
        expected = comparable(on_spark.plan(request))
        assert comparable(embedded.plan(request)) == expected, name
        assert expected["selected"], f"{name}: selects something"
    embedded.close()
    on_spark.close()

    # The bookkeeping of one run, on two copies of the ledger.
    two = ledger_of(tmp_path, "two")
    shutil.copytree(one.table_root, two.table_root)
    redrives = requests["manual, dead letters in a time range"]
    done = Replayer(None, one, now=NOW).plan(requests["automatic"]).sends
    done += Replayer(None, one, now=NOW).plan(redrives).sends
    results = {p.root_id: Sent(p.root_id, message_id=f"id-{p.root_id}") for p in done}
    with holding(Fence(one.table_root, epoch=2)), holding(Fence(two.table_root, epoch=2)):
        EmbeddedBookkeeper(Ledger(one.table_root)).settle(done, results)
        SparkBookkeeper(spark, Ledger(two.table_root)).settle(done, results)

    def rows(settings: Settings, table: str, drop: tuple[str, ...]) -> list[dict[str, Any]]:
        found = [
            {k: v for k, v in row.items() if k not in drop}
            for row in read_table(settings.table_root, table)
        ]
        return sorted(found, key=lambda row: row["root_id"])

    times = ("status_changed_at", "dead_lettered_at", "redriven_at", "seen_event_hashes")
    settled = rows(one, ROOT_STATE, times)
    assert settled == rows(two, ROOT_STATE, times)
    assert rows(one, DEAD_LETTERS, times) == rows(two, DEAD_LETTERS, times)
    moved = {row["status"] for row in settled if row["root_id"] in results}
    assert moved == {status.REPLAYED, status.DEAD_LETTERED}
