"""Alerts end to end without a JVM: the rules over a real Delta `root_state`, messages
delivered by Airflow's SmtpNotifier to a real SMTP server and by the WebhookNotifier to a
real HTTP receiver, and the open/resolved state kept in `alert_log`."""

from __future__ import annotations

import doctest
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold.alerts import (
    AlertDeliveryError,
    check_quality,
    check_state,
    evaluate_state,
    message,
    rules,
)
from ackfold.alerts import log as alert_log
from ackfold.config import Settings, load_settings
from ackfold.ledger.reading.sql import SqlReader
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ALERT_LOG, ROOT_STATE, TABLE_PROPERTIES, TABLES, Ledger
from tests.alert_fixtures import (
    NOW,
    SECRET_PAYLOAD,
    Receiver,
    SmtpServer,
    ago,
    html_of,
    state,
    write_state,
)
from tests.ledger_fixtures import arrow_schema

pytestmark = pytest.mark.usefixtures("clean_env")

UI = "http://airflow.test/ackfold"


def settings_for(warehouse: Path, **alerts: Any) -> Settings:
    return load_settings(
        var_dir=warehouse.parent / "var",
        warehouse=str(warehouse),
        apps={"orders": {"alerts": {"max_failed": 0, "max_timed_out": 0}}, "clicks": {}},
        alerts={"ui_url": UI, **alerts},
    )


def channels_on(warehouse: Path) -> Settings:
    return settings_for(warehouse, email_to=["ops@example.test"], webhook_conn_id="ackfold_alerts")


def overwrite_state(warehouse: Path, rows: list[dict[str, Any]]) -> None:
    """root_state as a later reconcile and replay leave it (one row per root)."""
    schema = arrow_schema(ROOT_STATE)
    write_deltalake(
        Ledger(str(warehouse)).path(ROOT_STATE),
        pa.Table.from_pylist([{n: r.get(n) for n in schema.names} for r in rows], schema),
        mode="overwrite",
        partition_by=list(TABLES[ROOT_STATE][1]),
        configuration=dict(TABLE_PROPERTIES),
    )


def orders_failing() -> list[dict[str, Any]]:
    return [
        state(11, "orders", status.FAILED, ago(8), ago(5), fail_at=ago(8)),
        state(12, "orders", status.COMPLETED, ago(6), ago(4), last=ago(5)),
        state(21, "clicks", status.COMPLETED, ago(6), ago(4), last=ago(5)),
    ]


def orders_recovered() -> list[dict[str, Any]]:
    # Root 11 was replayed a minute after it was marked; its attempt 2 completed.
    return [
        state(11, "orders", status.REPLAYED, ago(8), ago(4), fail_at=ago(8), reconciled=ago(5)),
        state(13, "orders", status.COMPLETED, ago(4), ago(1), last=ago(2), attempt=2, origin=11),
        state(12, "orders", status.COMPLETED, ago(6), ago(4), last=ago(5)),
        state(21, "clicks", status.COMPLETED, ago(6), ago(4), last=ago(5)),
    ]


def test_each_rule_finds_its_breach_and_names_the_worst_roots(tmp_path: Path) -> None:
    warehouse = tmp_path / "w"
    write_state(
        warehouse,
        [
            state(1, "orders", status.FAILED, ago(8), ago(5), fail_at=ago(8)),
            state(2, "orders", status.TIMED_OUT, ago(14), ago(5)),
            # Marked timed out 10 minutes ago, replayed since: still found in the window.
            state(3, "orders", status.REPLAYED, ago(20), ago(2), reconciled=ago(10)),
            # Marked before the window: not counted, though its replay is recent.
            state(4, "orders", status.REPLAYED, ago(40), ago(2), reconciled=ago(30)),
            # Failed (marked 18 minutes ago, before the window), dead-lettered 3 minutes ago.
            state(
                5,
                "orders",
                status.DEAD_LETTERED,
                ago(20),
                ago(3),
                fail_at=ago(20),
                reconciled=ago(18),
            ),
            state(6, "orders", status.COMPLETED, ago(12), ago(1), last=ago(2)),  # 10 min
            state(7, "orders", status.PENDING, ago(40), ago(40)),
            state(8, "clicks", status.COMPLETED, ago(3), ago(1), last=ago(3)),
        ],
    )
    settings = settings_for(warehouse)
    found = {(f.app, f.rule): f for f in evaluate_state(SqlReader(str(warehouse)), settings, NOW)}
    assert {key for key, f in found.items() if f.breached} == {
        ("orders", rules.FAILED),
        ("orders", rules.TIMED_OUT),
        ("orders", rules.DEAD_LETTERED),
        ("orders", rules.UNSETTLED_AGE),
        ("orders", rules.LATENCY_P99),
    }
    # `wordcount` (the demo app, configured) is evaluated too, with nothing to say.
    assert not any(f.breached for (app, _), f in found.items() if app != "orders")
    failed, timed_out = found[("orders", rules.FAILED)], found[("orders", rules.TIMED_OUT)]
    assert (failed.value, failed.root_ids, failed.threshold) == ("1", (1,), "at most 0")
    assert (timed_out.value, timed_out.root_ids) == ("2", (3, 2))  # the longest waiting first
    assert found[("orders", rules.DEAD_LETTERED)].root_ids == (5,)
    unsettled = found[("orders", rules.UNSETTLED_AGE)]
    # timeout 5m + grace 15m: only the 40-minute-old pending root is over the limit.
    assert (unsettled.value, unsettled.threshold) == ("40m", "at most 20m")
    assert unsettled.root_ids == (7,)
    latency = found[("orders", rules.LATENCY_P99)]
    assert (latency.threshold, latency.root_ids) == ("at most 5m", (6,))
    assert latency.link == "/roots?app=orders&root_id=0x0000000000000006"
    assert all(SECRET_PAYLOAD not in repr(f) for f in found.values())


def test_limits_follow_the_app_policy_and_off_silences_a_rule(tmp_path: Path) -> None:
    warehouse = tmp_path / "w"
    write_state(warehouse, [state(1, "orders", status.FAILED, ago(8), ago(5), fail_at=ago(8))])
    settings = load_settings(
        var_dir=tmp_path / "var",
        warehouse=str(warehouse),
        defaults={"alerts": {"max_failed": 5}},
        apps={"orders": {"alerts": {"max_failed": "off", "max_unsettled_age": "1m"}}},
    )
    found = {f.rule: f for f in evaluate_state(SqlReader(str(warehouse)), settings, NOW)}
    assert (found[rules.FAILED].breached, found[rules.FAILED].threshold) == (False, "off")
    # The failed root is unsettled (awaiting its replay) for 8 minutes: over 1m.
    assert found[rules.UNSETTLED_AGE].breached
    assert settings.app("clicks").alerts.max_failed == 5


def test_one_message_per_channel_when_a_breach_opens_none_while_it_lasts_one_when_it_resolves(
    tmp_path: Path, smtp: SmtpServer, webhook: Receiver, connections: dict[str, str]
) -> None:
    warehouse = tmp_path / "w"
    write_state(warehouse, orders_failing())
    settings = channels_on(warehouse)

    opened = check_state(settings, now=NOW, airflow_run_id="scheduled__1")
    assert opened["breached"] == ["orders:failed"]
    assert opened["sent"] == {"email": 1, "webhook": 1}
    (mail,) = smtp.messages
    assert mail["Subject"] == "[ackfold] orders: failed opened"
    assert mail["To"] == "ops@example.test"
    link = f"{UI}/roots?app=orders&amp;root_id=0x000000000000000b"
    body = html_of(mail)
    assert "1 root(s) failed in the last 15m (at most 0)" in body
    assert "worst roots: <code>0x000000000000000b</code>" in body
    assert link in body
    (text,) = webhook.texts()
    assert webhook.posts[0]["path"] == "/hooks/T1/B2/secret"
    assert webhook.posts[0]["content_type"] == "application/json"
    assert text.splitlines()[1:] == [
        "OPENED failed: 1 root(s) failed in the last 15m (at most 0)",
        "  worst roots: 0x000000000000000b",
        f"  {UI}/roots?app=orders&root_id=0x000000000000000b",
    ]
    assert SECRET_PAYLOAD not in body
    assert SECRET_PAYLOAD not in text

    # The next evaluations, with the breach still on: nothing is sent again.
    assert check_state(settings, now=NOW + timedelta(minutes=1))["sent"] == {
        "email": 0,
        "webhook": 0,
    }
    assert (len(smtp.messages), len(webhook.posts)) == (1, 1)

    # The root was replayed and its replay completed; its failure left the window.
    overwrite_state(warehouse, orders_recovered())
    later = NOW + timedelta(minutes=16)
    assert check_state(settings, now=later)["sent"] == {"email": 1, "webhook": 1}
    assert smtp.messages[1]["Subject"] == "[ackfold] orders: failed resolved"
    assert webhook.texts()[1].splitlines()[1] == (
        "RESOLVED failed: 0 root(s) failed in the last 15m (at most 0) (open for 16m)"
    )
    assert check_state(settings, now=later + timedelta(minutes=5))["sent"] == {
        "email": 0,
        "webhook": 0,
    }
    log = DeltaTable(Ledger(str(warehouse)).path(ALERT_LOG)).to_pyarrow_table().to_pylist()
    assert sorted((r["channel"], r["event"], r["root_ids"]) for r in log) == [
        ("email", "opened", [11]),
        ("email", "resolved", []),
        ("webhook", "opened", [11]),
        ("webhook", "resolved", []),
    ]
    assert {r["airflow_run_id"] for r in log if r["event"] == "opened"} == {"scheduled__1"}


def test_a_channel_that_fails_gets_the_alert_on_the_next_run_and_the_other_only_once(
    tmp_path: Path, smtp: SmtpServer, webhook: Receiver, connections: dict[str, str]
) -> None:
    warehouse = tmp_path / "w"
    write_state(warehouse, orders_failing())
    settings = channels_on(warehouse)
    webhook.status = 503
    with pytest.raises(AlertDeliveryError) as caught:
        check_state(settings, now=NOW)
    assert "webhook for app orders" in str(caught.value)
    assert "connection 'ackfold_alerts' answered HTTP 503" in str(caught.value)
    assert "secret" not in str(caught.value)  # the URL is the webhook's secret
    assert len(smtp.messages) == 1

    webhook.status = 200
    assert check_state(settings, now=NOW + timedelta(minutes=1))["sent"] == {
        "email": 0,
        "webhook": 1,
    }
    assert len(smtp.messages) == 1
    assert webhook.texts()[-1].splitlines()[1].startswith("OPENED failed")


def test_without_a_channel_breaches_are_logged_and_nothing_is_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = tmp_path / "w"
    write_state(warehouse, orders_failing())
    with caplog.at_level("INFO", logger="ackfold.alerts"):
        result = check_state(settings_for(warehouse), now=NOW)
    assert result["breached"] == ["orders:failed"]
    assert result["sent"] == {}
    breach = "alert breach: app=orders rule=failed value=1 limit=at most 0"
    assert f"{breach} roots=0x000000000000000b" in caplog.text
    assert "no channel configured" in caplog.text
    assert SECRET_PAYLOAD not in caplog.text
    assert not DeltaTable.is_deltatable(Ledger(str(warehouse)).path(ALERT_LOG))


def quality_rows(run_id: str, failed: set[str]) -> list[dict[str, Any]]:
    checks = [("orders", "lost_roots"), ("orders", "duplicate_rate"), (None, "xor_zero")]
    return [
        {"run_id": run_id, "app": app, "check_name": name, "success": name not in failed}
        for app, name in checks
    ]


def test_a_failed_quality_verdict_opens_an_alert_and_a_passing_one_resolves_it(
    tmp_path: Path, smtp: SmtpServer, webhook: Receiver, connections: dict[str, str]
) -> None:
    settings = channels_on(tmp_path / "w")
    result = check_quality(settings, quality_rows("q1", {"lost_roots"}), now=NOW)
    assert result["breached"] == ["orders:quality"]
    assert webhook.texts()[0].splitlines()[1:] == [
        "OPENED quality: quality run q1: 1 of 2 check(s) failed: lost_roots",
        f"  {UI}/quality",
    ]
    # A run whose checks wrote nothing changes nothing; a passing run resolves.
    assert check_quality(settings, [], now=NOW)["sent"] == {}
    check_quality(settings, quality_rows("q2", set()), now=NOW + timedelta(minutes=5))
    assert [m["Subject"] for m in smtp.messages] == [
        "[ackfold] orders: quality opened",
        "[ackfold] orders: quality resolved",
    ]


def test_the_failure_hook_tells_the_channels_which_task_failed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    webhook: Receiver,
    connections: dict[str, str],
) -> None:
    from types import SimpleNamespace

    from ackfold.airflow.defaults import on_failure

    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("ACKFOLD_ALERTS__WEBHOOK_CONN_ID", "ackfold_alerts")
    ti = SimpleNamespace(dag_id="ackfold_reconcile", task_id="reconcile", try_number=3)
    error = RuntimeError(f"spark-submit failed\nrecord: {SECRET_PAYLOAD}")
    on_failure({"ti": ti, "run_id": "scheduled__2", "exception": error})
    (text,) = webhook.texts()
    assert text == (
        "ackfold task failed: ackfold_reconcile.reconcile (run scheduled__2): "
        "RuntimeError: spark-submit failed"
    )


def test_a_webhook_connection_without_a_url_is_named_in_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ackfold.alerts import WebhookError
    from ackfold.alerts.notifiers import webhook_url

    monkeypatch.setenv("AIRFLOW_CONN_EMPTY_HOOK", json.dumps({"conn_type": "http"}))
    with pytest.raises(WebhookError, match="connection 'empty_hook' has no webhook URL"):
        webhook_url("empty_hook")
    monkeypatch.setenv(
        "AIRFLOW_CONN_PARTS_HOOK",
        json.dumps({"conn_type": "http", "host": "chat.example.test", "port": 8443,
                    "schema": "https", "extra": {"endpoint": "/hooks/abc"}}),
    )  # fmt: skip
    assert webhook_url("parts_hook") == "https://chat.example.test:8443/hooks/abc"


def test_alert_settings_refuse_what_cannot_work(tmp_path: Path) -> None:
    from ackfold.config import ConfigError

    for bad, words in (
        ({"alerts": {"email_to": ["not-an-address"]}}, "alerts.email_to"),
        ({"alerts": {"ui_url": "airflow:8080"}}, "alerts.ui_url"),
        ({"defaults": {"alerts": {"max_failed": -1}}}, "a whole number from 0, or off"),
        ({"defaults": {"alerts": {"max_latency_p99": "soon"}}}, "90s, 5m, 1h, or off"),
    ):
        with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
            load_settings(var_dir=tmp_path / "var", **bad)


def test_doctests() -> None:
    from ackfold.alerts import notifiers

    for module in (rules, alert_log, message, notifiers):
        assert doctest.testmod(module).failed == 0, module.__name__
