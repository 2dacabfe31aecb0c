"""A replay run and the fence (issue 55): it plans from a state that no stale commit can
change after its claim, and once it has lost the ledger's lease it sends nothing more and
appends nothing to `replay_log` (invariant 19).

Real parts only: delta-rs tables on disk, the real lease, and moto's SQS server (plain
Python, no JVM) as the source queue."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits import fence as fence_module
from ackfold.ledger.commits.fence import Fence, holding
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.errors import LeaseLost
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import DEAD_LETTERS, REPLAY_LOG, ROOT_STATE, Ledger
from ackfold.replay.planner import Plan
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replay import run_replay
from ackfold.runs.replayer import Replayer
from tests.replay_ledger import T0, Failed, read_table, write_failed

NOW = T0 + timedelta(hours=1)
QUEUE = "orders-in"


class Stop(Exception):
    """Raised from `on_plan`: the run ends with nothing sent."""


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's SQS server with the queue the roots came from; its boto3 client."""
    import boto3
    from moto.server import ThreadedMotoServer

    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")):
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(port=0, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]
    client = boto3.client("sqs", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1")
    url = client.create_queue(QueueName=QUEUE)["QueueUrl"]
    client.port = port
    try:
        yield client
    finally:
        client.delete_queue(QueueUrl=url)  # moto keeps its queues per process, not per server
        server.stop()


def _settings(tmp_path: Path, port: int = 9) -> Settings:
    return load_settings(
        var_dir=tmp_path / "var",
        engine={"kind": "embedded"},
        sqs={"endpoint_url": f"http://127.0.0.1:{port}", "region": "us-east-1"},
        replay={"chunk": 10, "send_attempts": 1, "send_backoff": "1s"},
        defaults={"replay_backoff": "1s", "max_attempts": 3},
    )


def _waiting(sqs: Any) -> int:
    url = sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(found["Attributes"]["ApproximateNumberOfMessages"])


def _another_host_takes_the_lease(warehouse: str) -> None:
    """Another host, whose clock is past this run's expiry (this run froze), takes the
    lease and gives it back, having had nothing to do."""
    ahead = LedgerLease(warehouse, clock=lambda: datetime.now(UTC) + timedelta(hours=1))
    with ahead.held("a reconcile on another host"):
        pass


def _complete(root_id: int) -> Any:
    """A reconcile's MERGE that completes `root_id` (a fenced commit's action)."""
    source = pa.table({"root_id": pa.array([root_id], pa.int64())})

    def merge(table: Any, properties: Any) -> None:
        (
            table.merge(source, "t.root_id = s.root_id", source_alias="s", target_alias="t",
                        commit_properties=properties)
            .when_matched_update({"status": f"'{status.COMPLETED}'"})
            .execute()
        )  # fmt: skip

    return merge


def test_a_stale_merge_between_the_plan_and_the_claim_is_planned_again(tmp_path: Path) -> None:
    """A reconcile frozen with the lease (epoch 1) wakes and completes a failed root just
    after the replay (epoch 2) planned and just before its claim. The root must not be
    sent: the replay sees that something else committed before its claim and plans again
    from the claimed snapshot. (Before issue 55 the run sent it although it completed.)"""
    settings = _settings(tmp_path)
    done, open_ = write_failed(settings.table_root, [Failed(1), Failed(2)])
    with LedgerLease(settings.table_root).held("a reconcile that will freeze"):
        pass  # epoch 1: the frozen reconcile's
    state = Ledger(settings.table_root).path(ROOT_STATE)
    woke: list[str] = []

    def frozen_reconcile_wakes(path: str, moment: str) -> None:
        if path == state and moment == "before" and not woke:
            woke.append(path)  # once: its own commit passes this hook too
            Fence(settings.table_root, epoch=1).commit(state, _complete(done))

    plans: list[Plan] = []

    def keep(plan: Plan) -> None:
        plans.append(plan)
        raise Stop

    fence_module.COMMIT_HOOKS.append(frozen_reconcile_wakes)
    try:
        with pytest.raises(Stop):
            run_replay(settings, ReplayRequest(automatic=True), now=NOW, on_plan=keep)
    finally:
        fence_module.COMMIT_HOOKS.remove(frozen_reconcile_wakes)
    assert woke, "the frozen reconcile committed between the plan and the claim"
    rows = {r["root_id"]: r["status"] for r in read_table(settings.table_root, ROOT_STATE)}
    assert rows[done] == status.COMPLETED
    assert [p.root_id for p in plans[0].sends] == [open_], "a completed root is never sent"


def test_a_run_that_lost_its_lease_after_planning_sends_and_logs_nothing(
    tmp_path: Path, sqs: Any
) -> None:
    """The run froze after its plan and claim; another host took the lease meanwhile. It
    wakes: no `planned` row lands in `replay_log`, and nothing reaches the queue."""
    settings = _settings(tmp_path, sqs.port)
    write_failed(settings.table_root, [Failed(n) for n in range(3)])
    with pytest.raises(LeaseLost, match="lease epoch 2"):
        run_replay(
            settings,
            ReplayRequest(automatic=True),
            now=NOW,
            on_plan=lambda plan: _another_host_takes_the_lease(settings.table_root),
        )
    assert _waiting(sqs) == 0
    assert read_table(settings.table_root, REPLAY_LOG) == []


def test_a_run_that_loses_its_lease_between_chunks_sends_no_further_chunk(
    tmp_path: Path, sqs: Any
) -> None:
    """Chunks of 10: the lease is taken by another host after the first chunk is sent.
    The second chunk is not sent, and the first chunk's `sent` marks are refused."""
    settings = _settings(tmp_path, sqs.port)
    write_failed(settings.table_root, [Failed(n) for n in range(20)])
    lease = LedgerLease(settings.table_root)
    with lease.held("a replay that will freeze") as fence, holding(fence):
        replayer = Replayer(None, settings, now=NOW)
        try:
            plan = replayer.plan(ReplayRequest(automatic=True))
            assert len(plan.sends) == 20
            with pytest.raises(LeaseLost):
                replayer.execute(
                    plan,
                    after_send=lambda sent: _another_host_takes_the_lease(settings.table_root),
                )
        finally:
            replayer.close()
    assert _waiting(sqs) == 10, "the chunk sent before the lease was lost, and no other"
    log = read_table(settings.table_root, REPLAY_LOG)
    assert {r["event"] for r in log} == {"planned"}, "no mark after the lease was lost"


def test_a_quiet_replay_claims_nothing_and_a_dry_run_claims_nothing(tmp_path: Path) -> None:
    """The claim comes only once a real plan has sends: a replay with nothing to send,
    and a dry run, leave `root_state` and `dead_letters` at their versions."""
    settings = _settings(tmp_path)
    write_failed(settings.table_root, [Failed(1, status=status.COMPLETED), Failed(2)])
    ledger = Ledger(settings.table_root)
    versions = {
        name: DeltaTable(ledger.path(name)).version() for name in (ROOT_STATE, DEAD_LETTERS)
    }
    quiet = run_replay(settings, ReplayRequest(app="nothing", requested_by="t"), now=NOW)
    assert quiet.planned == 0
    dry = run_replay(settings, ReplayRequest(automatic=True, dry_run=True), now=NOW)
    assert dry.planned == 1
    after = {name: DeltaTable(ledger.path(name)).version() for name in (ROOT_STATE, DEAD_LETTERS)}
    assert after == versions
