"""Maintenance as a verb, on the embedded engine (delta-rs, no JVM): `run_maintenance`
takes the ledger's turn and carries its epoch on every commit, times and says each step,
reports what VACUUM deleted (files and bytes, as the disk shows them), pushes its metrics
over OTLP; its dry run commits nothing and foresees what a run deletes; `ackfold
maintain` prints it, or one line for an error."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from deltalake import DeltaTable

from ackfold.cli import main as cli_module
from ackfold.cli.maintain import describe
from ackfold.config import load_settings
from ackfold.ledger.commits.fence import FENCE_APP, STRIDE
from ackfold.ledger.housekeeping.store_maintenance import STEPS, vacuum_hours
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, TABLES, Ledger
from ackfold.maintenance import run_maintenance
from tests.alert_fixtures import Receiver, otlp_points
from tests.maintenance_ledger import (
    NOW,
    DiskAtVacuum,
    expected_rows,
    files,
    no_retention,
    rows_of,
    write_ledger,
)


@pytest.fixture
def made(tmp_path: Path) -> Path:
    """The var dir of a ledger for maintenance (`tests.maintenance_ledger`)."""
    write_ledger(load_settings(var_dir=tmp_path / "made"))
    return tmp_path / "made"


def test_a_run_times_each_step_carries_the_epoch_and_reports_what_vacuum_deleted(
    made: Path,
) -> None:
    settings = no_retention(load_settings(var_dir=made))
    ledger = Ledger(settings.table_root)
    expected = {name: expected_rows(ledger, name, NOW, settings) for name in TABLES}
    disk = DiskAtVacuum(ledger)

    summary = run_maintenance(settings, now=NOW, progress=disk)

    assert (summary["engine"], summary["dry_run"], summary["protocol"]) == (
        "embedded", False, "delta-rs",
    )  # fmt: skip
    assert summary["roots_expired"] == 3
    for name in TABLES:
        assert rows_of(ledger, name) == expected[name], name
    # Every ledger table carries the run's epoch: its claim, and each commit after it.
    epoch = summary["epoch"]
    assert epoch >= 1
    for name in TABLES:
        version = DeltaTable(ledger.path(name)).transaction_version(FENCE_APP)
        assert version is not None, name
        assert version // STRIDE == epoch, name
    # What VACUUM deleted is what left the disk, file for file and byte for byte.
    left = disk.gone
    for name in TABLES:
        assert summary["removed"][name] == {
            "files": len(left[name]), "bytes": sum(left[name].values()),
        }, name  # fmt: skip
    assert summary["files_removed"] == sum(len(g) for g in left.values()) > 0
    assert summary["bytes_removed"] == sum(sum(g.values()) for g in left.values()) > 0
    assert summary["checkpointed"] == list(TABLES)
    assert set(summary["optimized"]) == {
        "ack_events",
        "roots",
        "replay_log",
        "app_progress",
        "root_state",
    }
    # Each step timed, and said as it starts and ends, in order.
    assert list(summary["seconds_by_step"]) == list(STEPS)
    assert all(seconds >= 0 for seconds in summary["seconds_by_step"].values())
    assert [line.split()[1] for line in disk.said] == [s for s in STEPS for _ in (0, 1)]
    assert disk.said[0] == "maintenance: retention (1/4) ..."
    assert disk.said[-1].startswith("maintenance: logs done in ")


def test_vacuum_keeps_deltas_7_days_by_default_and_more_of_unfolded_appends(made: Path) -> None:
    # Both engines set `delta.deletedFileRetentionDuration` to these hours (the
    # conformance suite checks the property on each; Delta 4's VACUUM ignores RETAIN).
    settings = load_settings(var_dir=made)
    ledger = Ledger(settings.table_root)
    assert vacuum_hours(settings, ledger, ROOT_STATE) == 168
    # Its unfolded appends were committed moments ago (a commit's time is the wall
    # clock's, whatever the events say): 7 days keep them already.
    assert vacuum_hours(settings, ledger, ACK_EVENTS) == 168
    # With no retention, ack_events still keeps the hours back to its first unfolded
    # commit (at least one); the other tables keep nothing.
    bare = no_retention(settings)
    assert vacuum_hours(bare, ledger, ROOT_STATE) == 0
    assert vacuum_hours(bare, ledger, ACK_EVENTS) >= 1


def test_a_dry_run_commits_nothing_and_foresees_what_a_run_deletes(made: Path) -> None:
    settings = no_retention(load_settings(var_dir=made))
    ledger = Ledger(settings.table_root)
    versions = {name: DeltaTable(ledger.path(name)).version() for name in TABLES}
    before = {name: files(ledger, name) for name in TABLES}

    planned = run_maintenance(settings, now=NOW, dry_run=True)

    assert {name: DeltaTable(ledger.path(name)).version() for name in TABLES} == versions
    assert {name: files(ledger, name) for name in TABLES} == before, "a file was deleted"
    assert planned["dry_run"] is True
    # VACUUM now (keeping nothing) would delete exactly the files the tables no longer name.
    for name in TABLES:
        on_disk, named = before[name]
        unnamed = {p: size for p, size in on_disk.items() if p not in named}
        assert planned["removed"][name] == {
            "files": len(unnamed), "bytes": sum(unnamed.values()),
        }, name  # fmt: skip
    done = run_maintenance(settings, now=NOW)
    for key in ("retention_cutoff", "roots_expired", "events_deleted", "reports_deleted"):
        assert planned[key] == done[key], key
    assert done["events_deleted"] > 0
    assert set(planned["optimized"]) == set(done["optimized"])


def test_a_run_pushes_its_metrics(made: Path, webhook: Receiver) -> None:
    settings = load_settings(var_dir=made, metrics={"endpoint": webhook.url})
    summary = run_maintenance(settings, now=NOW)
    points = otlp_points(webhook)
    engine = {"ackfold.engine": "embedded"}
    (expired,) = points["ackfold.maintenance.roots_expired"]
    assert (expired["kind"], expired["value"], expired["attributes"]) == ("sum", 3, engine)
    assert expired["resource"]["ackfold.run"] == "maintenance"
    (events,) = points["ackfold.maintenance.events_deleted"]
    assert events["value"] == summary["events_deleted"] > 0
    rows = {p["attributes"]["ackfold.table"]: p["value"]
            for p in points["ackfold.maintenance.rows_deleted"]}  # fmt: skip
    assert rows == {"sent_messages": 1, "quality_results": 1, "app_progress": 1}
    removed = {p["attributes"]["ackfold.table"]: p["value"]
               for p in points["ackfold.maintenance.files_removed"]}  # fmt: skip
    assert removed == {name: figures["files"] for name, figures in summary["removed"].items()}
    (optimized,) = points["ackfold.maintenance.tables_optimized"]
    assert optimized["value"] == len(summary["optimized"]) == 5
    (checkpointed,) = points["ackfold.maintenance.tables_checkpointed"]
    assert checkpointed["value"] == len(TABLES)
    steps = {p["attributes"]["ackfold.step"]: p["value"]
             for p in points["ackfold.maintenance.step.duration"]}  # fmt: skip
    assert set(steps) == set(STEPS)
    # A dry run deletes nothing and counts nothing.
    pushed = len(webhook.posts)
    run_maintenance(settings, now=NOW, dry_run=True)
    assert len(webhook.posts) == pushed


def test_ackfold_maintain_says_each_step_and_prints_its_summary(
    made: Path,
    clean_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(made))
    now = NOW.isoformat()
    assert cli_module.run(["maintain", "--dry-run", "--now", now]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "dry run: nothing changed; a run now would"
    assert "expire 3 root(s) settled before" in out
    assert err == ""
    events = DeltaTable(Ledger(load_settings().table_root).path(ACK_EVENTS)).version()

    assert cli_module.run(["maintain", "--now", now, "--json"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert (summary["engine"], summary["roots_expired"], summary["dry_run"]) == (
        "embedded", 3, False,
    )  # fmt: skip
    assert DeltaTable(Ledger(load_settings().table_root).path(ACK_EVENTS)).version() > events
    assert err.splitlines()[0] == "ackfold: maintenance: retention (1/4) ..."
    assert "ackfold: maintenance: vacuum done in " in err

    assert cli_module.run(["maintain", "--now", now]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("maintained on the embedded engine, lease epoch ")
    assert "expired: 0 event(s) deleted" in out  # the first run deleted them


def test_ackfold_maintain_errors_are_one_line(
    clean_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    assert cli_module.run(["maintain", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ackfold: no ledger under ")
    assert err.count("\n") == 1
    with pytest.raises(SystemExit) as raised:
        cli_module.run(["maintain", "--wait", "-1"])
    assert raised.value.code == 2
    assert "'-1' is not a number of seconds" in capsys.readouterr().err
    assert cli_module.run(["maintain", "--now", "yesterday-ish"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ackfold: ")
    assert "--now" in err
    assert "Traceback" not in err


def test_the_summary_reads_as_a_step_a_line() -> None:
    text = describe({
        "engine": "spark", "epoch": 7, "seconds": 3.25, "dry_run": False,
        "retention_cutoff": "2026-01-01T00:00:00+00:00", "roots_expired": 2,
        "events_deleted": 8, "reports_deleted": {"sent_messages": 1},
        "optimized": ["ack_events", "roots"], "vacuumed": ["ack_events", "roots"],
        "files_removed": 3, "bytes_removed": 3 * 2**20, "checkpointed": ["ack_events", "roots"],
        "logs_kept": ["ack_events"], "seconds_by_step": {"retention": 1.0, "vacuum": 0.5},
    })  # fmt: skip
    assert text.splitlines() == [
        "maintained on the spark engine, lease epoch 7, in 3.2 s",
        "  retention: 2 root(s) settled before 2026-01-01T00:00:00+00:00 expired: 8 event(s) "
        "deleted (1.0 s)",
        "  retention: report rows deleted: sent_messages 1",
        "  optimize: ack_events, roots Z-ordered or compacted",
        "  vacuum: 3 file(s), 3.0 MiB, deleted from 2 table(s) (0.5 s)",
        "  logs: 2 table(s) checkpointed; logs kept whole: ack_events",
    ]


def test_doctests() -> None:
    import doctest

    from ackfold.cli import maintain

    result = doctest.testmod(maintain)
    assert result.attempted >= 2
    assert result.failed == 0


def test_the_dags_task_is_the_same_run_with_each_step_in_its_log(
    made: Path,
    clean_env: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from ackfold.airflow.tasks import maintenance_in_task

    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(made))
    with caplog.at_level(logging.INFO, logger="ackfold.airflow"):
        summary = maintenance_in_task()
    assert (summary["engine"], summary["dry_run"]) == ("embedded", False)
    assert summary["roots_expired"] == 6  # by the clock, all long settled
    assert list(summary["seconds_by_step"]) == list(STEPS)
    logged = [r.getMessage() for r in caplog.records if r.name == "ackfold.airflow"]
    assert "maintenance: vacuum (3/4) ..." in logged
    assert json.loads(logged[-1])["epoch"] == summary["epoch"]
