"""The reconcile, replay and manual replay DAGs, run with `dag.test()` (real spark-submits)
on a ledger the word-count demo app wrote on a real ElasticMQ, with seeded faults."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ackfold.config import Settings, load_settings
from ackfold.config.demo import FaultSettings
from ackfold.demo.feed import Feed
from ackfold.demo.wordcount import WordCount, with_demo_policy
from ackfold.ledger.schema.tables import REPLAY_LOG, ROOT_STATE
from ackfold_dev.airflow_env import demo_app_env
from tests.airflow.conftest import SETTINGS
from tests.conftest import JARS_DIR, PROJECT_DIR
from tests.sqs.conftest import sqs_server  # noqa: F401 (a fixture)

MESSAGES = 40
# Enough faults that 40 sentences surely give failed and timed-out roots (seed 3 gives
# 6 failed and 5 timed out), and no poison: every failure is replayable.
FAULTS = FaultSettings(seed=3, drop={"split": 0.15}, fail={"split": 0.15})


@pytest.fixture(scope="module")
def dags(demo: tuple[Settings, str]) -> Any:
    """The DAGs, parsed in the demo's environment (its app is in the replay form)."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(PROJECT_DIR / "dags")).dags


@pytest.fixture(scope="module")
def demo(sqs_server: Any) -> Iterator[tuple[Settings, str]]:  # noqa: F811
    """The demo's ingest and both queries, once, in the warehouse the DAGs' spark-submits
    use; reconcile and replay are left to the DAGs. Yields the settings and the queue URL."""
    from ackfold.spark import get_spark

    patch = pytest.MonkeyPatch()
    # The DAGs' spark-submits read the settings from the environment.
    patch.setenv("ACKFOLD_SQS__ENDPOINT_URL", sqs_server.endpoint_url)
    # The word count with the demo's policy (a 10 s timeout), registered for them as
    # `make run` registers it: in the environment.
    queue = f"dags-{uuid.uuid4().hex[:8]}"
    settings = with_demo_policy(load_settings(
        var_dir=SETTINGS.var_dir, jars_dir=JARS_DIR, spark={"master": "local[2]"},
        sqs={"endpoint_url": sqs_server.endpoint_url, "wait_time": "1s"},
        apps={"wordcount": {"source_queue": queue}},
    ))  # fmt: skip
    policy = json.loads(demo_app_env(settings)["ACKFOLD_APPS__WORDCOUNT"])
    policy.pop("dag")  # the app is run by the fixture, not by a DAG of its own
    patch.setenv("ACKFOLD_APPS__WORDCOUNT", json.dumps(policy))
    app = WordCount(get_spark(settings, app_name="ackfold-tests"), settings, faults=FAULTS)
    client = app.queue.client
    url = client.create_queue(QueueName=app.queue.queue)["QueueUrl"]
    started = time.monotonic()
    Feed.build(MESSAGES, FAULTS).send(client, url)
    while app.step():  # until the queue is drained
        pass
    # Dropped sentences time out 10 s (the demo policy) after their first event.
    time.sleep(max(0.0, started + 11 - time.monotonic()))
    yield settings, url
    patch.undo()


def _by_status(settings: Settings) -> dict[int, str]:
    import deltalake

    table = deltalake.DeltaTable(f"{settings.table_root}/{ROOT_STATE}").to_pyarrow_table(
        columns=["root_id", "status"]
    )
    return dict(zip(table["root_id"].to_pylist(), table["status"].to_pylist(), strict=True))


def _queued(settings: Settings, url: str) -> int:
    from ackfold.sources.sqs_client import sqs_client

    attributes = sqs_client(settings).get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def _return_value(run: Any, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    query = XComModel.get_many(
        run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value"
    )
    with create_session() as session:
        (row,) = session.scalars(query).all()
        return XComModel.deserialize_value(row)


def test_reconcile_then_a_manual_dry_run_then_the_automatic_replay(
    dags: Any, demo: tuple[Settings, str]
) -> None:
    from airflow.utils.state import DagRunState

    settings, url = demo
    assert _queued(settings, url) == 0

    # Reconcile: the demo's roots get their statuses.
    assert dags["ackfold_reconcile"].test().state == DagRunState.SUCCESS
    before = _by_status(settings)
    assert len(before) == MESSAGES
    counts = {s: list(before.values()).count(s) for s in set(before.values())}
    assert set(counts) == {"completed", "failed", "timed_out"}, counts
    to_replay = {r for r, s in before.items() if s in ("failed", "timed_out")}

    # A manual dry run shows what it would send and sends nothing.
    run = dags["ackfold_manual_replay"].test(run_conf={"app": "wordcount"})
    assert run.state == DagRunState.SUCCESS
    summary = _return_value(run, "replay")
    assert summary["dry_run"] is True
    assert summary["selected"] == summary["planned"] == len(to_replay)
    assert summary["sent"] == 0
    assert len(summary["sends"]) == len(to_replay)
    assert {s["action"] for s in summary["sends"]} == {"replay"}
    assert {s["attempt"] for s in summary["sends"]} == {2}
    assert _by_status(settings) == before
    assert _queued(settings, url) == 0
    import deltalake

    log = deltalake.DeltaTable(f"{settings.table_root}/{REPLAY_LOG}").to_pyarrow_table(
        columns=["dry_run", "requested_by"]
    )
    assert set(log["dry_run"].to_pylist()) == {True}
    # dag.test() triggers as the user "dag_test": requested_by names who triggered.
    assert set(log["requested_by"].to_pylist()) == {"airflow:dag_test"}

    # The automatic replay sends every failed and timed-out root back (attempt 1 of 5).
    assert dags["ackfold_replay"].test().state == DagRunState.SUCCESS
    after = _by_status(settings)
    assert {r for r, s in after.items() if s == "replayed"} == to_replay
    assert {r: s for r, s in after.items() if r not in to_replay} == {
        r: s for r, s in before.items() if r not in to_replay
    }
    assert _queued(settings, url) == len(to_replay)


def test_a_bad_manual_conf_fails_validation_naming_each_field(
    dags: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow.utils.state import DagRunState, TaskInstanceState

    conf = {
        "root_id": ["1"],  # a typo the form cannot catch when the run comes over REST
        "since": "2026-11-23T00:00:00Z",
        "until": "2026-11-22T00:00:00Z",
    }
    with caplog.at_level(logging.ERROR, logger="ackfold.airflow"):
        run = dags["ackfold_manual_replay"].test(run_conf=conf)
    assert run.state == DagRunState.FAILED
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {
        "validate": TaskInstanceState.FAILED, "replay": TaskInstanceState.UPSTREAM_FAILED
    }  # fmt: skip
    (ti,) = [ti for ti in run.get_task_instances() if ti.task_id == "validate"]
    assert ti.try_number == 1, "a bad conf is not retried"
    # The failure hook's one line names every bad field.
    assert any(
        "invalid manual replay request (root_id, until)" in record.getMessage()
        for record in caplog.records
    ), [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize(
    ("key", "value", "bound"),
    [
        # Past a float: once an uncaught OverflowError in `validate`, retried twice.
        ("rate", 10**400, "greater than the maximum of 100000"),
        # A pacer that sleeps for ever, holding the ledger lock.
        ("rate", 1e-320, "less than the minimum of 0.1"),
        # Past Spark's 32-bit limit.
        ("limit", 3_000_000_000, "greater than the maximum of 10000000"),
    ],
)
def test_a_rate_or_limit_out_of_range_is_refused_before_the_run_starts(
    dags: Any, key: str, value: float, bound: str
) -> None:
    """The form's bounds are the library's (`ackfold.ledger.reading.parse`), and Airflow checks a
    conf against them when the run is triggered: its REST API answers 400 with this text,
    and no run is created."""
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match=f"Invalid input for param {key}: ") as refused:
        dags["ackfold_manual_replay"].test(run_conf={key: value})
    assert bound in str(refused.value)


def test_a_time_at_the_calendars_edge_fails_validation_at_once(dags: Any) -> None:
    from airflow.utils.state import TaskInstanceState

    run = dags["ackfold_manual_replay"].test(run_conf={"since": "0001-01-01T00:00:00+01:00"})
    (ti,) = [ti for ti in run.get_task_instances() if ti.task_id == "validate"]
    assert ti.state == TaskInstanceState.FAILED
    assert ti.try_number == 1, "out of range is the input's fault: not retried"
