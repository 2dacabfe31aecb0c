"""Replay planning on the embedded engine (DuckDB over delta-rs reads, no JVM): what an
automatic run and a manual one select, what each root becomes (a new attempt, a dead
letter, a skip and why), and what the write-ahead log makes of a run that crashed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits.fence import Fence, holding
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import REPLAY_LOG, Ledger
from ackfold.replay.bookkeeping import PLANNED
from ackfold.replay.embedded_books import EmbeddedBookkeeper
from ackfold.replay.planner import DEAD_LETTER, NEW, REPLAY, SENT, UNSENT, Plan, UnknownRoots
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replayer import Replayer
from ackfold.sources.base import Sent
from tests.replay_ledger import T0, Failed, read_table, write_failed

NOW = T0 + timedelta(hours=1)


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    settings = load_settings(
        var_dir=tmp_path / "var",
        engine={"kind": "embedded"},
        defaults={"replay_backoff": "60s", "max_attempts": 3},
        apps={"clicks": {"replay_backoff": "10s", "max_attempts": 5}},
    )
    # A replay's sends and commits are a leased run's: with no fence in force they raise.
    with holding(Fence(settings.table_root, epoch=1)):
        yield settings


def plan(settings: Settings, request: ReplayRequest, now: datetime = NOW) -> Plan:
    replayer = Replayer(None, settings, now=now)
    try:
        assert replayer.engine.name == "embedded"
        return replayer.plan(request)
    finally:
        replayer.close()


def auto(**fields: object) -> ReplayRequest:
    return ReplayRequest(automatic=True, requested_by="test", **fields)  # type: ignore[arg-type]


def test_an_automatic_run_waits_each_attempts_backoff_but_not_a_dead_letter(
    settings: Settings,
) -> None:
    roots = [
        Failed(1, changed_at=NOW - timedelta(seconds=120)),  # attempt 1: waits 60 s, done
        Failed(2, attempt=2, changed_at=NOW - timedelta(seconds=90)),  # waits 120 s
        Failed(3, attempt=3, changed_at=NOW - timedelta(seconds=1)),  # out of attempts
        Failed(4, status=status.TIMED_OUT, changed_at=NOW - timedelta(seconds=61)),
        Failed(5, status=status.COMPLETED, changed_at=NOW - timedelta(hours=1)),
        Failed(6, status=status.DEAD_LETTERED, changed_at=NOW - timedelta(hours=1)),
        Failed(7, app="clicks", attempt=2, changed_at=NOW - timedelta(seconds=21)),  # 20 s
        Failed(8, app="clicks", attempt=4, changed_at=NOW - timedelta(seconds=79)),  # 80 s
    ]
    ids = write_failed(settings.table_root, roots)
    found = plan(settings, auto())
    assert found.selected == 4
    assert [(p.root_id, p.action, p.attempt) for p in found.sends] == [
        (ids[0], REPLAY, 2),
        (ids[3], REPLAY, 2),
        (ids[6], REPLAY, 3),
        (ids[2], DEAD_LETTER, 4),
    ]
    first, timed_out, click, dead = found.sends
    assert (first.target, dead.target) == ("orders-in", "orders-in-dlq")
    assert first.reason == "failed in work: boom"
    assert timed_out.reason == "timed out after stage work"
    assert click.origin_root_id == roots[6].origin
    assert all(p.state == NEW and p.payload for p in found.sends)
    assert found.skipped == {}
    # An hour later every failed root's backoff has passed.
    later = plan(settings, auto(), now=NOW + timedelta(hours=1))
    assert {p.root_id for p in later.sends} == {ids[i] for i in (0, 1, 2, 3, 6, 7)}


def test_an_automatic_run_takes_at_most_max_per_run_or_its_limit_oldest_first(
    settings: Settings,
) -> None:
    ids = write_failed(
        settings.table_root,
        [Failed(n, changed_at=T0 - timedelta(minutes=n % 7, seconds=n)) for n in range(20)],
    )
    capped = settings.model_copy(
        update={"replay": settings.replay.model_copy(update={"max_per_run": 5})}
    )
    oldest = sorted(range(20), key=lambda n: (-(n % 7) * 60 - n, ids[n]))
    assert [p.root_id for p in plan(capped, auto()).sends] == [ids[n] for n in oldest[:5]]
    assert len(plan(capped, auto(limit=3)).sends) == 3
    assert len(plan(settings, auto(app="clicks")).sends) == 0


def test_a_manual_run_selects_by_its_filters(settings: Settings) -> None:
    roots = [
        Failed(1, changed_at=T0),
        Failed(2, status=status.TIMED_OUT, changed_at=T0 + timedelta(minutes=1)),
        Failed(3, status=status.DEAD_LETTERED, attempt=3, changed_at=T0 + timedelta(minutes=2)),
        Failed(4, app="clicks", changed_at=T0 + timedelta(minutes=3)),
        Failed(5, status=status.COMPLETED, changed_at=T0 + timedelta(minutes=4)),
    ]
    ids = write_failed(settings.table_root, roots)

    def chosen(**fields: object) -> list[int]:
        request = ReplayRequest(requested_by="test", **fields)  # type: ignore[arg-type]
        return [p.root_id for p in plan(settings, request).sends]

    assert chosen() == [ids[0], ids[1], ids[3]]
    assert chosen(app="orders") == [ids[0], ids[1]]
    assert chosen(statuses=(status.DEAD_LETTERED,)) == [ids[2]]
    assert chosen(since=T0 + timedelta(minutes=1), until=T0 + timedelta(minutes=3)) == [ids[1]]
    assert chosen(limit=2) == [ids[0], ids[1]]
    # A person decided: a manual replay ignores the backoff and the attempts left.
    redrive = plan(settings, ReplayRequest(statuses=(status.DEAD_LETTERED,), requested_by="t"))
    assert [(p.action, p.attempt, p.prior_status) for p in redrive.sends] == [
        (REPLAY, 4, status.DEAD_LETTERED)
    ]


def test_root_ids_are_taken_whatever_their_status_and_skipped_with_the_reason(
    settings: Settings,
) -> None:
    ids = write_failed(
        settings.table_root,
        [Failed(1), Failed(2, status=status.COMPLETED), Failed(3, status=status.TIMED_OUT)],
    )
    found = plan(settings, ReplayRequest(root_ids=tuple(ids), requested_by="test"))
    assert found.selected == 3
    # Changed at the same time: by root id.
    assert [p.root_id for p in found.sends] == sorted([ids[0], ids[2]])
    assert found.skipped == {"completed: nothing to replay": 1}
    only = plan(
        settings,
        ReplayRequest(root_ids=tuple(ids), statuses=(status.TIMED_OUT,), requested_by="t"),
    )
    assert [p.root_id for p in only.sends] == [ids[2]]
    assert only.skipped == {
        "completed: nothing to replay": 1,
        "failed: not in --status timed_out": 1,
    }


def test_unknown_root_ids_are_an_error_naming_them(settings: Settings) -> None:
    ids = write_failed(settings.table_root, [Failed(1)])
    with pytest.raises(UnknownRoots, match=r"not in root_state: 0x000000000000002a$"):
        plan(settings, ReplayRequest(root_ids=(ids[0], 42), requested_by="test"))


def test_roots_without_a_payload_are_skipped_and_say_why(
    settings: Settings,
) -> None:
    write_failed(
        settings.table_root,
        [
            Failed(1, registered=False),
            Failed(2, payload=None),
            Failed(3, source="file", queue="x"),
            Failed(4),
        ],
    )
    found = plan(settings, auto())
    assert [(p.action, p.reason) for p in found.sends] == [
        # No sender for its source: dead-lettered at once (tests/unit/test_replay_senders.py).
        (DEAD_LETTER, "no sender for source 'file': register one under the entry point "
         "group ackfold.senders"),
        (REPLAY, "failed in work: boom"),
    ]  # fmt: skip
    assert found.skipped == {
        "not in the roots table: no payload to send": 1,
        "no payload stored": 1,
    }


def test_a_dry_run_logs_what_it_would_send_and_a_real_run_still_sends_it(
    settings: Settings,
) -> None:
    ids = write_failed(settings.table_root, [Failed(1), Failed(2)])
    replayer = Replayer(None, settings, now=NOW)
    dry = replayer.plan(auto(dry_run=True))
    summary = replayer.execute(dry)
    replayer.close()
    assert (summary.dry_run, summary.planned, summary.sent) == (True, 2, 0)
    log = read_table(settings.table_root, REPLAY_LOG)
    assert sorted(r["root_id"] for r in log) == sorted(ids)
    assert {(r["event"], r["dry_run"]) for r in log} == {(PLANNED, True)}
    again = plan(settings, auto())
    assert [p.state for p in again.sends] == [NEW, NEW], "a dry run is never a send"


def test_after_a_crash_between_planned_and_sent_the_next_run_sends_exactly_those(
    settings: Settings,
) -> None:
    write_failed(settings.table_root, [Failed(n) for n in range(5)])
    books = EmbeddedBookkeeper(Ledger(settings.table_root))
    first = plan(settings, auto())
    # What `execute` writes before it sends anything; then the process dies.
    at = books.append_log(first, first.sends, PLANNED)
    # ... and a run that got further: two of the five marked sent.
    sent = {p.root_id: Sent(p.root_id, message_id=f"id-{p.root_id}") for p in first.sends[:2]}
    books.mark(first, first.sends[:2], sent)

    rerun = plan(settings, auto())
    assert [p.root_id for p in rerun.sends] == [p.root_id for p in first.sends]
    assert [p.state for p in rerun.sends] == [SENT, SENT, UNSENT, UNSENT, UNSENT]
    assert [p.root_id for p in rerun.to_send] == [p.root_id for p in first.sends[2:]]
    assert all(p.planned_at == at for p in rerun.sends), "planned_at is the first plan's"
    assert {p.new_root_id for p in rerun.sends} == {p.new_root_id for p in first.sends}
