"""Why a root is pending: `ackfold show` and the reader say what a root waits for, and name
a stage whose outputs no stage has ever acked (the sink mistake: a final emit without
`to=[]`)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ackfold.cli import main as cli_module
from ackfold.ledger.reading.pending import AppStages, app_stages, apps_stages
from ackfold.ledger.reading.reader import LedgerReader
from ackfold.ledger.reading.rows import span
from ackfold.ledger.schema import status
from ackfold.ledger.schema.ids import format_id
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, ROOTS
from ackfold.track.tracker import Tracker
from tests.ledger_fixtures import Clock, write_rows
from tests.sink_mistake import (
    APP,
    SENTENCES,
    START,
    SinkMistake,
    reconciled_rows,
    sink_mistake_ledger,
    word_count,
)
from tests.unit.test_cli_read import Run


@pytest.fixture(scope="module")
def mistake(tmp_path_factory: pytest.TempPathFactory) -> SinkMistake:
    return sink_mistake_ledger(tmp_path_factory.mktemp("sink") / "warehouse")


@pytest.fixture
def show(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> object:
    def run(warehouse: str, *args: str) -> Run:
        monkeypatch.setenv("ACKFOLD_WAREHOUSE", warehouse)
        monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path))
        code = cli_module.run(["show", *args])
        out, err = capsys.readouterr()
        return Run(("show", *args), code, out, err)

    return run


def test_show_says_the_sinks_outputs_were_never_acked_and_points_at_to(
    mistake: SinkMistake, show: object
) -> None:
    run = show(mistake.warehouse, format_id(mistake.stuck))  # type: ignore[operator]
    assert run.code == 0, run.err
    why = run.out.split("\nwhy pending\n")[1].split("\n\n")[0]
    lines = why.splitlines()
    assert lines[0].startswith("  waiting for acks: tuples emitted in this root are not acked")
    # The stages that wrote its events, newest first, each with how long it has waited.
    assert [line.split(":")[0].strip() for line in lines[1:4]] == ["count", "split", "spout"]
    assert lines[1].endswith("(stopped here)")
    assert "waited " in lines[1]
    assert (
        "stage 'count' is where this root stopped, and its outputs have never been acked by "
        "any stage in any root of app 'wc' (none of its 1 completed roots went through it)"
    ) in why
    assert "If 'count' writes the app's final table (a sink), emit that output with to=[]" in why
    assert "which stage's tuples are open cannot be read from the events" in why


def test_show_json_has_the_explanation(mistake: SinkMistake, show: object) -> None:
    run = show(mistake.warehouse, str(mistake.stuck), "--json")  # type: ignore[operator]
    assert run.code == 0, run.err
    pending = json.loads(run.out)["pending"]
    assert pending["stopped_at"] == "count"
    assert [s["stage"] for s in pending["stages"]] == ["count", "split", "spout"]
    assert "to=[]" in pending["never_acked"]
    settled = show(mistake.warehouse, str(mistake.empty), "--json")  # type: ignore[operator]
    assert json.loads(settled.out)["pending"] is None, "a completed root waits for nothing"
    assert "why pending" not in show(mistake.warehouse, str(mistake.empty)).out  # type: ignore[operator]


def test_the_waits_are_measured_from_each_stages_last_event(mistake: SinkMistake) -> None:
    journey = LedgerReader(mistake.warehouse).show_root(mistake.fresh, now=mistake.now)
    assert journey.state.status == status.PENDING
    assert journey.pending is not None
    by_stage = {wait.stage: wait for wait in journey.pending.stages}
    newest = max(e.event_time for e in journey.events)
    assert by_stage["count"].waited == mistake.now - newest == timedelta(minutes=1)
    assert by_stage["spout"].events == 1
    # A pending root too: count's outputs have never been acked, not just in timed-out roots.
    assert journey.pending.never_acked is not None


def test_the_timeout_reason_names_the_stage_and_to(mistake: SinkMistake) -> None:
    history = app_stages(LedgerReader(mistake.warehouse), APP)
    # The completed root (no word) went through spout and split, never count.
    assert history == AppStages(APP, frozenset({"spout", "split"}), completed_checked=1)
    reason = history.timeout_reason("count")
    assert reason == (
        "timed out at stage 'count', whose outputs no stage has ever acked in app 'wc' (none "
        "of its 1 completed roots went through it): if 'count' writes a final table, emit it "
        "with to=[]"
    )
    assert history.timeout_reason("split") is None
    capped = app_stages(LedgerReader(mistake.warehouse), APP, limit=1)
    assert capped.completed_checked == 1
    assert not capped.capped, "one completed root: the limit is not reached"


def test_a_root_waiting_on_a_healthy_pipeline_blames_no_stage(tmp_path: Path) -> None:
    # The same pipeline with to=[]: every root completes; then one root whose words count
    # has not processed yet (count is down).
    clock = Clock(START)
    done = word_count(clock, healthy=True)
    tracker = Tracker(APP, clock=clock, acks="compact")
    clock.tick(60)
    t = tracker.spout("m-late", source="sqs", source_queue="wc-in", payload="late words")
    clock.tick()
    tracker.emit([t], stage="split")
    tracker.ack(t, stage="split")
    events = done.events + tracker.drain()
    now = clock.now + timedelta(hours=2)
    states = reconciled_rows(events, now)
    warehouse = str(tmp_path / "warehouse")
    write_rows(warehouse, ROOTS, done.registrations + tracker.drain_roots())
    write_rows(warehouse, ACK_EVENTS, events)
    write_rows(warehouse, ROOT_STATE, states)
    assert sorted(row["status"] for row in states) == [status.COMPLETED] * 4 + [status.TIMED_OUT]

    journey = LedgerReader(warehouse).show_root(t.roots[0], now=now)
    assert journey.pending is not None
    assert journey.pending.stopped_at == "split"
    assert journey.pending.never_acked is None, "completed roots went through split"
    history = app_stages(LedgerReader(warehouse), APP)
    assert history.acked == {"spout", "split", "count"}
    assert history.timeout_reason("split") is None


def test_a_root_without_its_init_says_so(tmp_path: Path) -> None:
    clock = Clock(START)
    run = word_count(clock, ("one",))
    events = [e for e in run.events if e["kind"] != "init"]
    states = reconciled_rows(events, START + timedelta(minutes=5))
    warehouse = str(tmp_path / "warehouse")
    write_rows(warehouse, ROOTS, run.registrations)
    write_rows(warehouse, ACK_EVENTS, events)
    write_rows(warehouse, ROOT_STATE, states)
    journey = LedgerReader(warehouse).show_root(run.roots[0])
    assert journey.pending is not None
    assert journey.pending.waiting_for.startswith("waiting for its init event")


def test_span_reads_like_a_wait() -> None:
    assert span(timedelta(days=2, hours=3, minutes=4)) == "2d 3h"
    assert span(timedelta(minutes=4, seconds=10)) == "4m 10s"
    assert span(timedelta(seconds=12.7)) == "12s"


def test_the_histories_of_several_apps_are_each_apps_own_in_two_reads(tmp_path: Path) -> None:
    # Two apps in one ledger: "wc" with the sink mistake (count never acked), "wc-ok"
    # healthy; same sentences, so each app's roots have ids of their own. A reconcile that
    # times out roots of both reads their histories in one pass over each table.
    clock = Clock(START)
    mistaken = word_count(clock)
    healthy = word_count(clock, healthy=True, app="wc-ok", first=100)
    clock.tick(60)
    now = clock.now + timedelta(hours=2)
    events = mistaken.events + healthy.events
    warehouse = str(tmp_path / "warehouse")
    write_rows(warehouse, ROOTS, mistaken.registrations + healthy.registrations)
    write_rows(warehouse, ACK_EVENTS, events)
    write_rows(warehouse, ROOT_STATE, reconciled_rows(events, now))

    reader = LedgerReader(warehouse)
    both = apps_stages(reader, ["wc-ok", APP, "nobody"])
    assert len(reader.scans) == 2, [scan.sql for scan in reader.scans]
    assert both == [
        app_stages(LedgerReader(warehouse), "wc-ok"),
        app_stages(LedgerReader(warehouse), APP),
        AppStages("nobody", frozenset(), 0),
    ]
    assert both[0].acked == {"spout", "split", "count"}
    assert both[1].acked == {"spout", "split"}, "wc's completed root never reached count"
    assert both[0].timeout_reason("count") is None
    assert both[1].timeout_reason("count") is not None
    # The limit is each app's: one root each, and each app has more.
    capped = apps_stages(LedgerReader(warehouse), ["wc-ok", APP], limit=1)
    assert [(h.completed_checked, h.capped) for h in capped] == [(1, True), (1, False)]


def _batches_days_apart(tmp_path: Path, days: int) -> tuple[str, datetime]:
    """A ledger of one healthy app's two batches of completed roots, `days` apart: its
    warehouse, and a `now` two hours after the second."""
    clock = Clock(START)
    first = word_count(clock, healthy=True, app="wc-ok")
    clock.at(START + timedelta(days=days))
    second = word_count(clock, healthy=True, app="wc-ok", first=100)
    now = clock.now + timedelta(hours=2)
    events = first.events + second.events
    warehouse = str(tmp_path / "warehouse")
    write_rows(warehouse, ROOTS, first.registrations + second.registrations)
    write_rows(warehouse, ACK_EVENTS, events)
    write_rows(warehouse, ROOT_STATE, reconciled_rows(events, now))
    return warehouse, now


def test_a_history_as_of_now_reads_older_partitions_only_for_an_app_short_of_roots(
    tmp_path: Path,
) -> None:
    """A reconcile (and the root page) asks as of its `now`: the app's completed roots
    first seen in the week before it are read first, and root_state's older partitions
    only when those are fewer than the limit. A healthy app's history then costs what its
    recent days hold, not every day the ledger keeps."""
    from ackfold.ledger.reading.pending import RECENT_DAYS

    warehouse, now = _batches_days_apart(tmp_path, RECENT_DAYS + 3)
    per_batch = len(SENTENCES)

    reader = LedgerReader(warehouse)
    (recent,) = apps_stages(reader, ["wc-ok"], limit=per_batch - 1, now=now)
    assert [s.table for s in reader.scans] == [ROOT_STATE, ACK_EVENTS]
    assert "first_event_date >=" in reader.scans[0].sql
    assert (recent.completed_checked, recent.capped) == (per_batch - 1, True)
    assert recent.acked == {"spout", "split", "count"}

    reader = LedgerReader(warehouse)
    (both,) = apps_stages(reader, ["wc-ok"], limit=10 * per_batch, now=now)
    assert [s.table for s in reader.scans] == [ROOT_STATE, ROOT_STATE, ACK_EVENTS]
    assert "first_event_date <" in reader.scans[1].sql
    assert (both.completed_checked, both.capped) == (2 * per_batch, False)
    assert both == app_stages(LedgerReader(warehouse), "wc-ok", limit=10 * per_batch)


def test_a_history_as_of_now_reads_no_root_older_than_the_history_days(tmp_path: Path) -> None:
    """However short of roots an app is, its history as of `now` reads no partition first
    seen more than `HISTORY_DAYS` before it: those roots' events are gone by then
    (maintenance's retention), and the read would grow with the ledger's age."""
    from ackfold.ledger.reading.pending import HISTORY_DAYS

    warehouse, now = _batches_days_apart(tmp_path, HISTORY_DAYS + 2)
    per_batch = len(SENTENCES)

    reader = LedgerReader(warehouse)
    (bounded,) = apps_stages(reader, ["wc-ok"], limit=10 * per_batch, now=now)
    assert [s.table for s in reader.scans] == [ROOT_STATE, ROOT_STATE, ACK_EVENTS]
    older = reader.scans[1].sql
    assert "first_event_date >=" in older, older
    assert "first_event_date <" in older, older
    assert (bounded.completed_checked, bounded.capped) == (per_batch, False)
    (whole,) = apps_stages(LedgerReader(warehouse), ["wc-ok"], limit=10 * per_batch)
    assert whole.completed_checked == 2 * per_batch, "without `now`, every day kept"


def test_an_app_with_enough_recent_roots_reads_no_older_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An app whose last week completed `ENOUGH_RECENT` roots has shown its stages: its
    history reads that week only, however far below the limit it is."""
    from ackfold.ledger.reading import pending
    from ackfold.ledger.reading.pending import RECENT_DAYS

    warehouse, now = _batches_days_apart(tmp_path, RECENT_DAYS + 3)
    per_batch = len(SENTENCES)
    monkeypatch.setattr(pending, "ENOUGH_RECENT", per_batch)

    reader = LedgerReader(warehouse)
    (recent,) = apps_stages(reader, ["wc-ok"], limit=10 * per_batch, now=now)
    assert [s.table for s in reader.scans] == [ROOT_STATE, ACK_EVENTS]
    assert (recent.completed_checked, recent.capped) == (per_batch, False)
    assert recent.acked == {"spout", "split", "count"}
