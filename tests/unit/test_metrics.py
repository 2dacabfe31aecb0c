"""Metrics over OTLP, received by a real OTLP/HTTP receiver the test runs and decoded with
opentelemetry-proto: the counters of a reconcile's and a replay's summary, and the
gauges and time to detect that `root_state` gives after a reconcile."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from ackfold.config import Settings, load_settings
from ackfold.ledger.schema import status
from ackfold.metrics import export, export_ledger, export_run, record, target
from ackfold_dev.ports import free_port
from tests.alert_fixtures import NOW, Receiver, ago, otlp_points, state, write_state

pytestmark = pytest.mark.usefixtures("clean_env")

_OTEL = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
         "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
         "OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_HEADERS")  # fmt: skip


@pytest.fixture(autouse=True)
def no_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _OTEL:
        monkeypatch.delenv(name, raising=False)


def settings_at(tmp_path: Path, **metrics: object) -> Settings:
    return load_settings(
        var_dir=tmp_path / "var",
        warehouse=str(tmp_path / "w"),
        apps={"orders": {"timeout": "5m"}},
        metrics=metrics,
    )


def test_metrics_are_off_unless_an_endpoint_is_set(tmp_path: Path, webhook: Receiver) -> None:
    assert target(settings_at(tmp_path)) is None
    assert export_run(settings_at(tmp_path), "reconcile", {"events_read": 3}) is False
    assert export_ledger(settings_at(tmp_path), since=None) == {"exported": False}
    off = settings_at(tmp_path, endpoint=webhook.url, enabled=False)
    assert export_run(off, "reconcile", {"events_read": 3}) is False
    assert webhook.posts == []


def test_a_reconcile_and_a_replay_push_their_counters(tmp_path: Path, webhook: Receiver) -> None:
    settings = settings_at(tmp_path, endpoint=webhook.url)
    summary = {"app": None, "events_read": 12, "events_folded": 9, "duplicates_dropped": 3}
    assert export_run(settings, "reconcile", summary) is True
    replayed = {"dry_run": False, "sent": 4, "not_sent": 1, "dead_lettered": 2}
    assert export_run(settings, "replay", replayed, requested_by="airflow:ann") is True
    assert export_run(settings, "replay", {**replayed, "dry_run": True}) is True
    points = otlp_points(webhook)
    assert len(webhook.posts) == 2  # the dry run sends nothing worth a point
    for name, value in (("events_read", 12), ("events_folded", 9), ("duplicates_dropped", 3)):
        (point,) = points[f"ackfold.reconcile.{name}"]
        assert (point["kind"], point["value"]) == ("sum", value)
        assert point["attributes"] == {"ackfold.scope": "all"}
        assert point["resource"]["service.name"] == "ackfold"
        assert point["resource"]["ackfold.run"] == "reconcile"
    for name, value in (("sent", 4), ("failed", 1), ("dead_lettered", 2)):
        (point,) = points[f"ackfold.replay.{name}"]
        assert point["value"] == value
        assert point["attributes"] == {
            "ackfold.scope": "all",
            "ackfold.requested_by": "airflow:ann",
        }


def test_every_reconcile_run_pushes_its_counters_whoever_calls_it(
    tmp_path: Path, webhook: Receiver
) -> None:
    """`run_reconcile` owns its metrics: the CLI's run, the DAG's and the Spark job's all
    push the same counters, not only the callers that remembered to."""
    from ackfold import LedgerWriter, Tracker
    from ackfold.runs.reconcile import run_reconcile

    settings = settings_at(tmp_path, endpoint=webhook.url)
    tracker = Tracker("orders")
    for i in range(3):
        root = tracker.spout(f"m{i}", source="sqs", source_queue="q", payload="p")
        tracker.ack(root, stage="store")
    writer = LedgerWriter(settings.table_root)
    writer.append(tracker.drain_roots(), tracker.drain(), app_id="orders", version=1)
    summary = run_reconcile(settings)
    (point,) = otlp_points(webhook)["ackfold.reconcile.events_read"]
    assert point["value"] == summary["events_read"] == 6


def test_after_a_reconcile_the_ledger_gives_roots_by_status_oldest_pending_and_time_to_detect(
    tmp_path: Path, webhook: Receiver
) -> None:
    settings = settings_at(tmp_path, endpoint=webhook.url)
    write_state(
        tmp_path / "w",
        [
            # Marked by this run (it started 3 minutes ago): due 8 and 10 minutes ago.
            state(1, "orders", status.FAILED, ago(8), ago(2), fail_at=ago(8)),
            state(2, "orders", status.TIMED_OUT, ago(15), ago(2)),
            # Marked by an earlier run, replayed since: not this run's detection.
            state(3, "orders", status.REPLAYED, ago(30), ago(1), reconciled=ago(20)),
            state(4, "orders", status.PENDING, ago(4), ago(4)),
            state(5, "orders", status.COMPLETED, ago(9), ago(6), last=ago(7)),
            state(6, "clicks", status.COMPLETED, ago(9), ago(6), last=ago(7)),
        ],
    )
    result = export_ledger(settings, since=ago(3), now=NOW)
    assert result == {"exported": True, "roots": 6, "detected": 2}
    points = otlp_points(webhook)
    roots = {
        (p["attributes"]["ackfold.app"], p["attributes"]["ackfold.status"]): p["value"]
        for p in points["ackfold.roots"]
    }
    assert roots == {
        ("orders", "failed"): 1,
        ("orders", "timed_out"): 1,
        ("orders", "replayed"): 1,
        ("orders", "pending"): 1,
        ("orders", "completed"): 1,
        ("clicks", "completed"): 1,
    }
    ages = {
        p["attributes"]["ackfold.app"]: p["value"]
        for p in points["ackfold.roots.oldest_pending_age"]
    }
    assert ages == {"orders": 240.0, "clicks": 0.0}
    detect = {p["attributes"]["ackfold.kind"]: p for p in points["ackfold.detect.duration"]}
    # failed: due at its fail event 8 minutes ago, marked 2 minutes ago: 360 s.
    # timed out: due 15 - 5 = 10 minutes ago, marked 2 minutes ago: 480 s.
    assert (detect["failed"]["count"], detect["failed"]["sum"]) == (1, 360.0)
    assert (detect["timed_out"]["count"], detect["timed_out"]["sum"]) == (1, 480.0)
    assert detect["failed"]["bounds"] == [float(b) for b in record.DETECT_BUCKETS]
    assert {p["attributes"]["ackfold.app"] for p in detect.values()} == {"orders"}


def test_the_standard_otel_variables_point_them_at_a_collector(
    tmp_path: Path, webhook: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", webhook.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-scope-orgid=team-a")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "ackfold-prod")
    where = target(settings_at(tmp_path))
    assert where is not None
    assert (where.protocol, where.endpoint, where.described) == (
        "http/protobuf", None, "OTEL_EXPORTER_OTLP_ENDPOINT",
    )  # fmt: skip
    assert export_run(settings_at(tmp_path), "reconcile", {"events_read": 1}) is True
    assert webhook.posts[0]["headers"]["x-scope-orgid"] == "team-a"
    (point,) = otlp_points(webhook)["ackfold.reconcile.events_read"]
    assert point["resource"]["service.name"] == "ackfold-prod"


def test_a_collector_that_is_down_never_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "1")
    settings = settings_at(tmp_path, endpoint=f"http://127.0.0.1:{free_port()}")
    assert export_run(settings, "reconcile", {"events_read": 1}) is True


def test_a_protocol_ackfold_cannot_speak_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with caplog.at_level("WARNING", logger="ackfold.metrics"):
        assert export_run(settings_at(tmp_path), "reconcile", {}) is False
    assert "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL is 'http/json'" in (
        caplog.text
    )
    grpc = target(settings_at(tmp_path, endpoint="http://collector:4317", protocol="grpc"))
    assert grpc is not None
    assert grpc.endpoint == "http://collector:4317"


def test_doctests() -> None:
    assert doctest.testmod(export).failed == 0
