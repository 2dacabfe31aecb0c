"""A replay run's bookkeeping on the embedded engine (delta-rs commits, no JVM): the
statuses it sets, the dead letters it records, and that doing it again changes nothing;
and the run itself, which takes the ledger's turn and finishes what a crashed run sent
without sending it again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits.fence import Fence, holding
from ackfold.ledger.commits.lease import ledger_turn
from ackfold.ledger.commits.lock import LedgerBusy
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import DEAD_LETTERS, REPLAY_LOG, ROOT_STATE, Ledger
from ackfold.replay.bookkeeping import PLANNED
from ackfold.replay.embedded_books import EmbeddedBookkeeper
from ackfold.replay.planner import DEAD_LETTER, REPLAY, SENT
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replay import run_replay
from ackfold.runs.replayer import Replayer
from ackfold.sources.base import Sent
from tests.replay_ledger import T0, Failed, read_table, statuses, write_failed

NOW = T0 + timedelta(hours=1)


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    settings = load_settings(
        var_dir=tmp_path / "var",
        engine={"kind": "embedded"},
        defaults={"replay_backoff": "1s", "max_attempts": 3},
    )
    # The bookkeeping's commits are a leased run's: with no fence in force they raise.
    with holding(Fence(settings.table_root, epoch=1)):
        yield settings


def test_settling_sets_each_status_once_and_records_each_dead_letter_once(
    settings: Settings,
) -> None:
    ids = write_failed(
        settings.table_root,
        [Failed(1), Failed(2, attempt=3, first_event_at=T0 - timedelta(days=2)), Failed(3)],
    )
    replayer = Replayer(None, settings, now=NOW)
    plan = replayer.plan(ReplayRequest(automatic=True, requested_by="t"))
    replayer.close()
    assert [(p.root_id, p.action) for p in plan.sends] == sorted(
        [(ids[0], REPLAY), (ids[1], DEAD_LETTER), (ids[2], REPLAY)]
    )
    books = EmbeddedBookkeeper(Ledger(settings.table_root))
    # Meanwhile a reconcile found root 3 complete after all: the replay leaves it so.
    DeltaTable(f"{settings.table_root}/{ROOT_STATE}").update(
        {"status": f"'{status.COMPLETED}'"}, predicate=f"root_id = {ids[2]}"
    )
    done = plan.sends
    results = {p.root_id: Sent(p.root_id, message_id=f"m-{p.root_id}") for p in done}
    books.settle(done, results)
    assert statuses(settings.table_root) == {
        ids[0]: status.REPLAYED,
        ids[1]: status.DEAD_LETTERED,
        ids[2]: status.COMPLETED,
    }
    state = {r["root_id"]: r for r in read_table(settings.table_root, ROOT_STATE)}
    assert state[ids[0]]["status_changed_at"] > NOW
    letters = read_table(settings.table_root, DEAD_LETTERS)
    assert [(r["root_id"], r["attempt"], r["message_id"]) for r in letters] == [
        (ids[1], 3, f"m-{ids[1]}")
    ]
    assert letters[0]["reason"] == "failed in work: boom"
    assert letters[0]["dead_letter_queue"] == "orders-in-dlq"

    books.settle(done, results)  # a re-run finishing the same sends
    again = {r["root_id"]: r for r in read_table(settings.table_root, ROOT_STATE)}
    assert again == state, "no status and no time changed"
    assert read_table(settings.table_root, DEAD_LETTERS) == letters


def test_a_redrive_marks_its_dead_letter_once(settings: Settings) -> None:
    ids = write_failed(settings.table_root, [Failed(1, attempt=3)])
    replayer = Replayer(None, settings, now=NOW)
    dead = replayer.plan(ReplayRequest(automatic=True, requested_by="t")).sends
    books = EmbeddedBookkeeper(Ledger(settings.table_root))
    books.settle(dead, {ids[0]: Sent(ids[0], message_id="dlq-1")})
    redrive = replayer.plan(ReplayRequest(root_ids=(ids[0],), statuses=(status.DEAD_LETTERED,)))
    replayer.close()
    assert [(p.action, p.prior_status) for p in redrive.sends] == [(REPLAY, status.DEAD_LETTERED)]
    books.settle(redrive.sends, {ids[0]: Sent(ids[0], message_id="again")})
    (letter,) = read_table(settings.table_root, DEAD_LETTERS)
    assert letter["redriven_at"] is not None
    assert letter["redrive_root_id"] == redrive.sends[0].new_root_id
    assert letter["message_id"] == "dlq-1"
    assert statuses(settings.table_root) == {ids[0]: status.REPLAYED}
    books.settle(redrive.sends, {ids[0]: Sent(ids[0], message_id="again")})
    assert read_table(settings.table_root, DEAD_LETTERS) == [letter]


def test_a_run_finishes_what_a_crashed_run_sent_without_sending_it_again(
    settings: Settings,
) -> None:
    """The crashed run marked its sends and died before the statuses: the next run sends
    nothing (no queue is even reachable here) and sets them; the one after selects none."""
    ids = write_failed(settings.table_root, [Failed(n) for n in range(4)])
    replayer = Replayer(None, settings, now=NOW)
    crashed = replayer.plan(ReplayRequest(automatic=True, requested_by="t"))
    replayer.close()
    books = EmbeddedBookkeeper(Ledger(settings.table_root))
    books.append_log(crashed, crashed.sends, PLANNED)
    books.mark(crashed, crashed.sends, {i: Sent(i, message_id=f"m-{i}") for i in ids})

    summary = run_replay(settings, ReplayRequest(automatic=True, requested_by="t"), now=NOW)
    assert (summary.selected, summary.already_sent, summary.sent, summary.not_sent) == (
        4, 4, 0, 0
    )  # fmt: skip
    assert set(statuses(settings.table_root).values()) == {status.REPLAYED}
    log = read_table(settings.table_root, REPLAY_LOG)
    assert sorted(r["event"] for r in log) == [PLANNED] * 4 + [SENT] * 4, "nothing new sent"

    third = run_replay(settings, ReplayRequest(automatic=True, requested_by="t"), now=NOW)
    assert (third.selected, third.planned) == (0, 0)
    assert len(read_table(settings.table_root, REPLAY_LOG)) == 8


def test_a_run_waits_for_the_ledgers_turn_and_says_who_holds_it(settings: Settings) -> None:
    write_failed(settings.table_root, [Failed(1)])
    held, release = threading.Event(), threading.Event()

    def reconcile() -> None:
        with ledger_turn(settings, "a reconcile"):
            held.set()
            release.wait(30)

    other = threading.Thread(target=reconcile)
    other.start()
    try:
        assert held.wait(30)
        with pytest.raises(LedgerBusy, match="a reconcile"):
            run_replay(settings, ReplayRequest(automatic=True, requested_by="t"), wait=0.5)
    finally:
        release.set()
        other.join()
    assert statuses(settings.table_root) != {}, "nothing was planned or written meanwhile"
    assert read_table(settings.table_root, REPLAY_LOG) == []


def test_settling_reads_only_the_replayable_partitions_of_its_roots_days(
    settings: Settings,
) -> None:
    """The status MERGE names its partitions as literals (the days of the roots it settles,
    the replayable statuses): delta-rs scans those files only, not root_state's other
    statuses and days, which a year's ledger holds hundreds of."""
    earlier = T0 - timedelta(days=3)
    ids = write_failed(
        settings.table_root,
        [
            Failed(1),
            Failed(2, status=status.COMPLETED),  # its day, another status
            Failed(3, status=status.TIMED_OUT),  # its day, replayable
            Failed(4, first_event_at=earlier),  # another day
            Failed(5, status=status.COMPLETED, first_event_at=earlier),
        ],
    )
    replayer = Replayer(None, settings, now=NOW)
    plan = replayer.plan(ReplayRequest(automatic=True, requested_by="t"))
    replayer.close()
    done = [p for p in plan.sends if p.root_id == ids[0]]
    EmbeddedBookkeeper(Ledger(settings.table_root)).settle(
        done, {p.root_id: Sent(p.root_id, message_id="m") for p in done}
    )
    assert statuses(settings.table_root)[ids[0]] == status.REPLAYED
    merge = DeltaTable(f"{settings.table_root}/{ROOT_STATE}").history(1)[0]
    assert merge["operation"] == "MERGE"
    metrics = merge["operationMetrics"]
    # T0's failed and timed_out partitions: one file each.
    assert metrics["num_target_files_scanned"] == 2, metrics
    assert metrics["num_target_rows_updated"] == 1, metrics
