"""Every source either replays or dead-letters (issue 57): senders are found by the roots'
`source` through the `ackfold.senders` entry points (ackfold's own also without them), a
root whose source has no sender is dead-lettered at once with that reason, and the
quality checks pass once it is. All on the embedded engine: delta-rs and DuckDB, no JVM."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ackfold.config import Settings, load_settings
from ackfold.embedded import duck
from ackfold.ledger.schema import ids, status
from ackfold.ledger.schema.tables import DEAD_LETTERS, REPLAY_LOG
from ackfold.quality.batches import Window
from ackfold.quality.duck_batches import LedgerViews
from ackfold.quality.outcomes import NO_SENDER_OUTCOME
from ackfold.replay.planner import DEAD_LETTER, REPLAY
from ackfold.replay.queues import NO_QUEUE, SourceQueues, Unsendable, kafka_sender, sqs_sender
from ackfold.replay.request import ReplayRequest
from ackfold.replay.senders import GROUP, SenderError, find_sender, no_sender_reason, registered
from ackfold.runs import run_quality
from ackfold.runs.reconcile import run_reconcile
from ackfold.runs.replay import run_replay
from ackfold.runs.replayer import Replayer
from ackfold.sources.files import ATTEMPT_FIELD, ORIGIN_FIELD, FilesInbox
from ackfold.track.tracker import Tracker
from tests.replay_ledger import T0, Failed, files_orders, read_table, statuses, write_failed

NOW = T0 + timedelta(hours=1)
PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(
        var_dir=tmp_path / "var",
        engine={"kind": "embedded"},
        defaults={"replay_backoff": "60s", "max_attempts": 3},
    )


@pytest.fixture
def files_sender(tmp_path: Path) -> Iterator[None]:
    """A distribution that registers `ackfold.sources.files:FilesInbox` as the sender of
    `files`, installed for this test only: a dist-info folder on `sys.path`."""
    site = tmp_path / "site"
    info = site / "ackfold_files_sender-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ackfold-files-sender\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        f"[{GROUP}]\nfiles = ackfold.sources.files:FilesInbox\n"
        "broken = ackfold.sources.files:NoSuchSender\n"
    )
    sys.path.insert(0, str(site))
    try:
        yield
    finally:
        sys.path.remove(str(site))


def auto(**fields: object) -> ReplayRequest:
    return ReplayRequest(automatic=True, requested_by="test", **fields)  # type: ignore[arg-type]


def test_ackfolds_own_senders_are_registered_as_entry_points_and_found_without_them() -> None:
    text = (PROJECT / "pyproject.toml").read_text()
    assert f'[project.entry-points."{GROUP}"]' in text
    assert 'sqs = "ackfold.replay.queues:sqs_sender"' in text
    assert 'kafka = "ackfold.replay.queues:kafka_sender"' in text
    # This venv's install of ackfold may predate those entry points: found all the same.
    assert find_sender("sqs") is sqs_sender
    assert find_sender("kafka") is kafka_sender
    assert find_sender("files") is None
    assert {"sqs", "kafka"} <= set(registered())


def test_a_sender_registered_under_the_entry_point_group_is_found(files_sender: None) -> None:
    assert find_sender("files") is FilesInbox
    assert registered()["files"] == "ackfold.sources.files:FilesInbox"
    with pytest.raises(SenderError, match=r"source 'broken' .*NoSuchSender.* cannot be loaded"):
        find_sender("broken")


def test_a_root_whose_source_has_no_sender_is_dead_lettered_at_once_with_the_reason(
    settings: Settings,
) -> None:
    ids_ = write_failed(
        settings.table_root,
        [
            Failed(1, source="files", queue="/inbox"),  # attempt 1 of 3: still dead
            Failed(2, source="files", queue="/inbox", payload=None),  # no payload either
            Failed(3),  # sqs: replayed as before
        ],
    )
    reason = no_sender_reason("files")
    assert reason == (
        "no sender for source 'files': register one under the entry point group ackfold.senders"
    )
    replayer = Replayer(None, settings, now=NOW)
    try:
        plan = replayer.plan(auto())
    finally:
        replayer.close()
    assert plan.skipped == {}
    by_root = {p.root_id: p for p in plan.sends}
    assert {r: (by_root[r].action, by_root[r].reason) for r in ids_[:2]} == {
        ids_[0]: (DEAD_LETTER, reason),
        ids_[1]: (DEAD_LETTER, reason),
    }
    assert by_root[ids_[2]].action == REPLAY
    assert by_root[ids_[0]].target == NO_QUEUE

    # A manual run asked for the root dead-letters it too: nothing can replay it.
    manual = Replayer(None, settings, now=NOW)
    try:
        asked = manual.plan(ReplayRequest(root_ids=(ids_[0],), requested_by="test"))
    finally:
        manual.close()
    assert [(p.action, p.reason) for p in asked.sends] == [(DEAD_LETTER, reason)]


def test_the_no_sender_dead_letters_settle_and_a_rerun_changes_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    ids_ = write_failed(settings.table_root, [Failed(n, source="x", queue="q") for n in (1, 2)])
    summary = run_replay(settings, auto(), now=NOW)
    assert (summary.dead_lettered, summary.sent, summary.not_sent) == (2, 0, 0)
    assert statuses(settings.table_root) == {r: status.DEAD_LETTERED for r in ids_}
    letters = read_table(settings.table_root, DEAD_LETTERS)
    assert {(r["root_id"], r["reason"], r["dead_letter_queue"]) for r in letters} == {
        (r, no_sender_reason("x"), NO_QUEUE) for r in ids_
    }
    log = read_table(settings.table_root, REPLAY_LOG)
    assert {(r["event"], r["message_id"]) for r in log} == {("planned", None), ("sent", None)}

    again = run_replay(settings, auto(), now=NOW + timedelta(hours=1))
    assert (again.selected, again.dead_lettered) == (0, 0)
    # A manual redrive of such a dead letter has nothing to send.
    redrive = run_replay(
        settings,
        ReplayRequest(statuses=(status.DEAD_LETTERED,), requested_by="test"),
        now=NOW + timedelta(hours=1),
    )
    assert redrive.skipped == {f"{no_sender_reason('x')}: nothing to replay": 2}
    assert len(read_table(settings.table_root, DEAD_LETTERS)) == 2


def test_quality_fails_while_a_no_sender_root_is_failed_and_passes_once_it_is_dead_lettered(
    tmp_path: Path,
) -> None:
    """The issue's case: the README's `files` source, one order failed. Before, the
    replay skipped it and `no_lost_roots` failed on every run."""
    settings = load_settings(
        var_dir=tmp_path / "var",
        engine={"kind": "embedded"},
        defaults={"timeout": "5m", "replay_backoff": "1s", "max_attempts": 3},
        apps={"orders": {"quality": {"max_dead_letter_rate": 0.5}}},
    )
    good, bad, now = files_orders(settings)

    def lost() -> list[str]:
        report = run_quality(settings, app="orders", now=now)
        return [f"{r.check}: {'; '.join(r.sample)}" for r in report.violations]

    (before,) = lost()
    assert before.startswith("no_lost_roots"), before
    assert "failed, and not replayed" in before

    now = datetime.now(UTC) + timedelta(seconds=2)  # the backoff (1 s) has passed
    summary = run_replay(settings, auto(), now=now)
    assert summary.dead_lettered == 1
    run_reconcile(settings, now=now)  # a later reconcile leaves the dead letter as it is
    assert statuses(settings.table_root)[bad] == status.DEAD_LETTERED
    (letter,) = read_table(settings.table_root, DEAD_LETTERS)
    assert letter["reason"] == no_sender_reason("files")
    assert lost() == []
    # ... and says why it is settled: not a lost message, and not a root that ran out of
    # attempts either.
    assert settings.quality.window is not None
    views = LedgerViews(
        duck.connect(settings), settings, Window.ending(now, settings.quality.window)
    )
    overdue = views.overdue("orders")
    outcomes = dict(zip(overdue["root_id"].tolist(), overdue["outcome"].tolist(), strict=True))
    assert outcomes == {bad: NO_SENDER_OUTCOME, good: status.COMPLETED}


def test_the_files_sender_redrops_the_payload_into_the_inbox_as_the_new_attempt(
    settings: Settings, tmp_path: Path, files_sender: None
) -> None:
    inbox = tmp_path / "inbox"
    order = '{"id": "o-2", "qty": 0}'
    ids_ = write_failed(
        settings.table_root,
        [Failed(1, source="files", queue=str(inbox), payload=order),
         Failed(2, source="files", queue=str(inbox), attempt=3, payload=order),
         Failed(3, source="files", queue=str(inbox), payload="not json")],
    )  # fmt: skip
    summary = run_replay(settings, auto(), now=NOW)
    assert (summary.sent, summary.dead_lettered, summary.not_sent) == (1, 1, 1)
    first = Failed(1)
    new_root = ids.root_id("orders", "", 2, first.origin)
    replayed = inbox / f"replay-{ids.format_id(new_root)}.json"
    assert [p.name for p in inbox.iterdir()] == [replayed.name]
    assert json.loads(replayed.read_text()) == {
        "id": "o-2", "qty": 0, ORIGIN_FIELD: first.origin, ATTEMPT_FIELD: 2,
    }  # fmt: skip
    # The app's spout, given those two fields, registers exactly the new attempt's root.
    tracker = Tracker("orders")
    record = json.loads(replayed.read_text())
    again = tracker.spout(
        record["id"], source="files", source_queue=str(inbox),
        attempt=record[ATTEMPT_FIELD], origin_root_id=record[ORIGIN_FIELD],
    )  # fmt: skip
    assert again.roots == (new_root,)
    # The third attempt, out of attempts, went to the dead-letter folder, saying why.
    (dead,) = (tmp_path / "inbox-dlq").iterdir()
    assert dead.name == f"dead-{ids.format_id(ids_[1])}.json"
    assert json.loads(dead.read_text())["ackfold_reason"] == "failed in work: boom"
    assert statuses(settings.table_root)[ids_[0]] == status.REPLAYED
    # A payload that is no JSON object is not sent, and the run says why.
    assert "one JSON object" in (summary.last_error or "")


def test_the_unsendable_queue_sends_nothing() -> None:
    queue = SourceQueues(load_settings()).get("x", "q", "app")
    assert isinstance(queue, Unsendable)
    assert (queue.source, queue.queue, queue.dead_letter_queue) == ("x", "q", NO_QUEUE)


def test_the_sender_modules_examples_run() -> None:
    import doctest

    from ackfold.replay import senders
    from ackfold.sources import files

    for module in (senders, files):
        result = doctest.testmod(module)
        assert (result.failed, result.attempted > 0) == (0, True), module.__name__
