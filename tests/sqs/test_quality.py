"""The Great Expectations checks on a real ledger: a healthy one passes every check, and
each expectation catches the fault it guards against.

The ledger comes from the real cycle (ElasticMQ, ingest, a tracked stage, reconcile,
automatic replay): good messages, flaky ones that a replay fixes, a poison one that is
dead-lettered, and the producer's record of what it sent. Each fault is applied with SQL
to a copy of it, on a root of its own, so one quality run can show every fault of a kind
caught by its expectation, naming the broken root, and nothing else failing.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ackfold.cli import main as cli
from ackfold.config import Settings, load_settings
from ackfold.demo.feed import send_bodies
from ackfold.ledger.reading.reader import LedgerReader
from ackfold.ledger.schema import ids, status
from ackfold.ledger.schema.tables import ACK_EVENTS, QUALITY_RESULTS, ROOT_STATE, ROOTS, Ledger
from ackfold.ledger.schema.values import hex64
from ackfold.quality import QualityReport
from ackfold.runs import run_quality
from ackfold.runs.quality import quality_run_id
from ackfold.sources.sent import record_sent
from ackfold.sources.sqs_client import sqs_client
from tests.conftest import JARS_DIR
from tests.sqs.topology import APP, NumbersApp, body, create_queue

GOOD = 20
FLAKY = 3
# Per-app thresholds over the defaults (1% each): one poison message in 24 is 4.2%.
APP_QUALITY = {"max_dead_letter_rate": 0.1}


def quality_settings(var: Path, endpoint: str) -> Settings:
    return load_settings(
        var_dir=var,
        jars_dir=JARS_DIR,
        spark={"master": "local[2]"},
        sqs={"endpoint_url": endpoint, "wait_time": "1s", "visibility_timeout": "30s"},
        defaults={"max_attempts": 2, "replay_backoff": "1s", "replay_rate": 1000},
        apps={APP: {"quality": APP_QUALITY}},
    )


@dataclass(frozen=True)
class Healthy:
    """The healthy ledger's var directory and the roots the faults pick from."""

    var: Path
    endpoint: str
    built_at: datetime  # when the ledger was complete: no root is overdue for 20 minutes
    good: list[int]  # attempt-1 roots completed on the first try
    flaky: list[tuple[int, int]]  # (attempt 1, attempt 2) of the messages a replay fixed
    poison: list[int]  # the poison message's attempts, the last dead-lettered


@pytest.fixture(scope="module")
def healthy(
    spark: SparkSession, sqs_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Healthy:
    var = tmp_path_factory.mktemp("quality") / "var"
    settings = quality_settings(var, sqs_server.endpoint_url)
    queue = f"numbers-{uuid.uuid4().hex[:8]}"
    create_queue(sqs_client(settings), queue)
    app = NumbersApp(spark, settings, queue)
    bodies = [body(i) for i in range(GOOD)]
    bodies += [body(100 + i, fail_until=1) for i in range(FLAKY)] + [body(-1)]
    sent = send_bodies(app.queue.client, app.queue.url(queue), bodies)
    record_sent(spark, app.ledger, app=APP, source="sqs", source_queue=queue, message_ids=sent)
    # Cycle 1 fails the flaky and the poison message and replays them; cycle 2 completes
    # the flaky ones and dead-letters the poison one (max_attempts 2).
    for _ in range(2):
        app.cycle()
    states = app.states()
    by_origin: dict[int, list[dict[str, Any]]] = {}
    for state in sorted(states.values(), key=lambda s: s["attempt"]):
        by_origin.setdefault(state["origin_root_id"], []).append(state)
    good = [s[0]["root_id"] for s in by_origin.values() if len(s) == 1]
    flaky = [
        (s[0]["root_id"], s[1]["root_id"])
        for s in by_origin.values()
        if s[-1]["status"] == status.COMPLETED and len(s) == 2
    ]
    poison = [
        s["root_id"]
        for s in next(s for s in by_origin.values() if s[-1]["status"] == status.DEAD_LETTERED)
    ]
    assert (len(good), len(flaky), len(poison)) == (GOOD, FLAKY, 2), "the healthy ledger"
    return Healthy(var, sqs_server.endpoint_url, datetime.now(UTC), good, flaky, poison)


def broken_copy(healthy: Healthy, tmp_path: Path) -> tuple[Settings, Ledger]:
    var = tmp_path / "var"
    shutil.copytree(healthy.var / "warehouse", var / "warehouse")
    settings = quality_settings(var, healthy.endpoint)
    return settings, Ledger(settings.table_root)


def sql(spark: SparkSession, ledger: Ledger, *statements: str) -> None:
    """Run `statements` with `{table}` placeholders naming the ledger's tables."""
    names = {t: f"delta.`{ledger.path(t)}`" for t in (ACK_EVENTS, ROOTS, ROOT_STATE)}
    for statement in statements:
        spark.sql(statement.format(**names))


def caught(report: QualityReport) -> dict[str, str]:
    """Each violated check, as `suite check`, with its observed value and sample."""
    return {
        f"{r.suite} {r.check}": f"{r.observed} | {'; '.join(r.sample)}" for r in report.violations
    }


def test_a_healthy_ledger_passes_every_check(spark: SparkSession, healthy: Healthy) -> None:
    settings = quality_settings(healthy.var, healthy.endpoint)
    later = datetime.now(UTC) + timedelta(hours=1)  # every root is past timeout and grace
    report = run_quality(settings, spark=spark, now=later)

    assert caught(report) == {}
    assert report.apps == (APP,)
    results = {f"{r.suite} {r.check}": r for r in report.results}
    lost = results[f"delivery.{APP}.overdue_roots no_lost_roots"]
    assert lost.element_count == GOOD + 2 * FLAKY + 2, "every root was overdue, and settled"
    assert results[f"delivery.{APP}.sent_messages sent_registered"].element_count == 24
    # The app's own threshold (10%) applies, not the default (1%).
    dead = results[f"delivery.{APP}.rates dead_letter_rate"]
    assert (dead.observed, dead.threshold) == ("4.17%", "{'max_value': 0.1}")
    assert results[f"delivery.{APP}.rates duplicate_rate"].observed == "0.00%"

    rows = spark.read.format("delta").load(Ledger(settings.table_root).path(QUALITY_RESULTS))
    assert rows.where(rows.run_id == report.run_id).count() == len(report.results)
    # Data Docs: a page per suite, linked from the index, with its expectations.
    assert report.docs is not None
    index = report.docs.read_text()
    for suite in {r.suite for r in report.results}:
        page = "expectations/" + suite.replace(".", "/") + ".html"
        assert f'href="{page}"' in index
        assert (report.docs.parent / page).is_file()
    rates = report.docs.parent / f"expectations/delivery/{APP}/rates.html"
    assert "dead_letter_rate" in rates.read_text()


@pytest.fixture(scope="module")
def ledger_faults(
    spark: SparkSession, healthy: Healthy, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """One copy of the healthy ledger with a fault per ledger expectation, each on its own
    root, checked as of now (no root is overdue yet)."""
    settings, ledger = broken_copy(healthy, tmp_path_factory.mktemp("ledger-faults"))
    g = healthy.good
    init = "(SELECT * FROM {ack_events} WHERE root_id = %d AND kind = 'init')"
    # A third attempt of the poison message, past max_attempts 2, that nobody asked for.
    origin, last = healthy.poison[0], healthy.poison[-1]
    third = ids.root_id(APP, "", 3, origin)
    sql(
        spark,
        ledger,
        "ALTER TABLE {ack_events} ALTER COLUMN stage DROP NOT NULL",
        "INSERT INTO {ack_events} SELECT 'fault-null-stage', app, root_id, 'ack', 0, NULL, "
        f"event_time, NULL FROM {init % g[0]}",
        "INSERT INTO {ack_events} SELECT 'fault-kind', app, root_id, 'nack', 0, stage, "
        f"event_time, NULL FROM {init % g[1]}",
        # An event id reused for another event (its ack_val differs): the fold keeps one.
        "INSERT INTO {ack_events} SELECT event_id, app, root_id, kind, ack_val ^ 1, stage, "
        f"event_time, reason FROM {init % g[2]}",
        # A root id registered for another message.
        "INSERT INTO {roots} SELECT root_id, app, attempt, origin_root_id, source, "
        "source_queue, 'another-message', source_position, payload, ingested_at, id_scheme "
        f"FROM {{roots}} WHERE root_id = {g[3]}",
        # A redelivery, which the contract allows: the same event and root, written again.
        f"INSERT INTO {{ack_events}} SELECT * FROM {init % g[9]}",
        f"INSERT INTO {{roots}} SELECT * FROM {{roots}} WHERE root_id = {g[9]}",
        f"UPDATE {{roots}} SET origin_root_id = 12345 WHERE root_id = {g[4]}",
        f"INSERT INTO {{roots}} SELECT {third}, app, 3, origin_root_id, source, source_queue, "
        f"'m-3', NULL, payload, current_timestamp(), id_scheme "
        f"FROM {{roots}} WHERE root_id = {last}",
        f"INSERT INTO {{root_state}} SELECT * FROM {{root_state}} WHERE root_id = {g[5]}",
        f"UPDATE {{root_state}} SET status = 'done' WHERE root_id = {g[6]}",
        f"UPDATE {{root_state}} SET xor_acc = 42 WHERE root_id = {g[7]}",
        f"UPDATE {{root_state}} SET status = 'failed', fail_reason = NULL WHERE root_id = {g[8]}",
    )
    # As of the healthy ledger's end: no root is overdue, whatever the tests took before.
    return caught(run_quality(settings, spark=spark, now=healthy.built_at + timedelta(minutes=1)))


LEDGER_FAULTS = {
    # check: (how the fault is named in its sample, the good root it hit or None)
    "ledger.ack_events not_null.stage": ("event_id=fault-null-stage", 0),
    "ledger.ack_events kind_in_domain": ("event_id=fault-kind", 1),
    "ledger.ack_events event_id_unique": ("event_id=", 2),
    "ledger.roots root_id_unique": ("root_id=", 3),
    "ledger.roots origin_chain_valid": ("root_id=", 4),
    "ledger.roots attempts_within_max": ("attempt=3, max_attempts=2", None),
    "ledger.root_state root_id_unique": ("root_id=", 5),
    "ledger.root_state status_in_domain": ("root_id=", 6),
    "ledger.root_state completed_xor_zero": ("xor_acc=42", 7),
    "ledger.root_state failed_has_reason": ("status=failed", 8),
}


def test_ledger_faults_trip_only_their_own_expectations(
    ledger_faults: dict[str, str], healthy: Healthy
) -> None:
    assert set(ledger_faults) == set(LEDGER_FAULTS)
    # The two rows sharing an id, not the redelivered event and root written twice.
    assert ledger_faults["ledger.ack_events event_id_unique"].startswith("2 unexpected row(s)")
    assert ledger_faults["ledger.roots root_id_unique"].startswith("2 of ")
    redelivered = f"root_id={hex64(healthy.good[9])}"
    assert not [check for check, seen in ledger_faults.items() if redelivered in seen]


@pytest.mark.parametrize("check", list(LEDGER_FAULTS))
def test_each_ledger_expectation_catches_its_fault(
    check: str, ledger_faults: dict[str, str], healthy: Healthy
) -> None:
    assert check in ledger_faults, f"{check} missed its fault"
    named, good = LEDGER_FAULTS[check]
    assert named in ledger_faults[check]
    if good is not None:
        assert f"root_id={hex64(healthy.good[good])}" in ledger_faults[check]


@pytest.fixture(scope="module")
def delivery_faults(
    spark: SparkSession,
    healthy: Healthy,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch_module: pytest.MonkeyPatch,
) -> tuple[int, str, QualityReport]:
    """A copy with a fault per delivery guarantee, checked an hour on through the CLI:
    its exit code, its output, and the run's report as `quality_results` holds it."""
    settings, ledger = broken_copy(healthy, tmp_path_factory.mktemp("delivery-faults"))
    g = healthy.good
    # Lost: a root whose events never arrived (so it was never folded) ...
    sql(spark, ledger, f"DELETE FROM {{ack_events}} WHERE root_id = {g[10]}")
    sql(spark, ledger, f"DELETE FROM {{root_state}} WHERE root_id = {g[10]}")
    # ... and a replay whose new attempt never reached the app.
    sql(spark, ledger, f"DELETE FROM {{roots}} WHERE root_id = {healthy.flaky[0][1]}")
    # A message the producer sent that no root has.
    record_sent(
        spark,
        ledger,
        app=APP,
        source="sqs",
        source_queue="numbers-x",
        message_ids=["never-registered"],
    )
    late = ", ".join(str(first) for first, _ in healthy.flaky[1:])
    sql(
        spark,
        ledger,
        # Duplicates: two replayed roots whose first attempt completed after all.
        "UPDATE {root_state} SET status = 'completed_late', xor_acc = 0, init_seen = true "
        f"WHERE root_id IN ({late})",
        # Dead letters: two more messages (3 of 24: 12.5%, over the app's 10%).
        f"UPDATE {{root_state}} SET status = 'dead_lettered' WHERE root_id IN ({g[11]}, {g[12]})",
        # Latency: every completed tree took an hour.
        "UPDATE {root_state} SET last_event_at = first_event_at + INTERVAL 1 HOUR "
        "WHERE status = 'completed'",
    )

    monkeypatch_module.setenv("ACKFOLD_VAR_DIR", str(settings.var_dir))
    monkeypatch_module.setenv("ACKFOLD_JARS_DIR", str(JARS_DIR))
    monkeypatch_module.setenv(
        "ACKFOLD_APPS", f'{{"{APP}": {{"quality": {{"max_dead_letter_rate": 0.1}}}}}}'
    )
    monkeypatch_module.setenv("ACKFOLD_DEFAULTS__MAX_ATTEMPTS", "2")
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    code, output = _cli(["quality", "--now", later])
    rows = LedgerReader(settings.table_root).quality_run()
    return code, output, QualityReport.from_rows(rows)


def _cli(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.run(argv)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


DELIVERY_FAULTS = {
    f"delivery.{APP}.overdue_roots no_lost_roots": "never reconciled",
    f"delivery.{APP}.sent_messages sent_registered": "source_message_id=never-registered",
    f"delivery.{APP}.rates duplicate_rate": "8.33%",
    f"delivery.{APP}.rates dead_letter_rate": "12.50%",
    f"delivery.{APP}.rates latency_p99": "3,600.0 s",
}


def test_delivery_faults_fail_the_command_naming_each_violation(
    delivery_faults: tuple[int, str, QualityReport], healthy: Healthy
) -> None:
    code, output, report = delivery_faults
    assert code == 1
    assert set(caught(report)) == set(DELIVERY_FAULTS)
    assert f"{len(DELIVERY_FAULTS)} check(s) FAILED" in output
    for check, observed in DELIVERY_FAULTS.items():
        (line,) = [x for x in output.splitlines() if f"FAILED {check}:" in x]
        assert observed in line
    lost = caught(report)[f"delivery.{APP}.overdue_roots no_lost_roots"]
    assert f"root_id={hex64(healthy.good[10])}" in lost
    assert f"root_id={hex64(healthy.flaky[0][0])}" in lost
    assert "replayed, but the next attempt never registered" in lost


@pytest.mark.parametrize("check", list(DELIVERY_FAULTS))
def test_each_delivery_expectation_catches_its_fault(
    check: str, delivery_faults: tuple[int, str, QualityReport]
) -> None:
    violations = caught(delivery_faults[2])
    assert check in violations, f"{check} missed its fault"
    assert DELIVERY_FAULTS[check] in violations[check]


def test_the_dag_verdict_fails_with_the_same_message(
    spark: SparkSession, healthy: Healthy, tmp_path: Path
) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from ackfold.airflow.tasks import quality_verdict

    settings, ledger = broken_copy(healthy, tmp_path)
    sql(spark, ledger, f"UPDATE {{root_state}} SET xor_acc = 7 WHERE root_id = {healthy.good[0]}")
    airflow_run = "asset_triggered__2026-11-23T10:00:00+00:00"
    report = run_quality(settings, spark=spark, run_id=quality_run_id(airflow_run))
    with pytest.raises(AirflowFailException) as failed:
        quality_verdict(airflow_run, settings)
    message = str(failed.value)
    assert message == report.violation_message(), "what `ackfold quality` prints"
    assert message.startswith("quality checks failed (1):")
    assert "FAILED ledger.root_state completed_xor_zero" in message
    assert f"root_id={hex64(healthy.good[0])}" in message
    # A retry of the task runs it again: its rows are replaced, not added to.
    rows = len(LedgerReader(settings.table_root).quality_run(quality_run_id(airflow_run)))
    run_quality(settings, spark=spark, run_id=quality_run_id(airflow_run))
    assert len(LedgerReader(settings.table_root).quality_run(quality_run_id(airflow_run))) == rows


def test_a_schema_break_is_caught(spark: SparkSession, healthy: Healthy, tmp_path: Path) -> None:
    """A writer drops a contract column from ack_events, another writes payloads as bytes."""
    settings, ledger = broken_copy(healthy, tmp_path)
    events = spark.read.format("delta").load(ledger.path(ACK_EVENTS)).drop("stage")
    events.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
        ledger.path(ACK_EVENTS)
    )
    roots = spark.read.format("delta").load(ledger.path(ROOTS))
    roots = roots.withColumn("payload", roots.payload.cast("binary"))
    roots.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
        ledger.path(ROOTS)
    )
    violations = caught(run_quality(settings, spark=spark))
    assert "missing columns stage" in violations.pop("ledger.ack_events columns")
    assert "BinaryType" in violations.pop("ledger.roots type.payload")
    # The missing column's own checks cannot pass either; nothing else fails.
    assert set(violations) <= {"ledger.ack_events type.stage", "ledger.ack_events not_null.stage"}
