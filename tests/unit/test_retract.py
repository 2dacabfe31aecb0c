"""`run_retract` (issue 58) on delta-rs tables on disk: a dry run by default; a dead
letter's rows deleted by origin in one commit per output, written ahead to `retract_log`,
fenced by the lease; refused for a root that is not a dead letter, whose message an attempt
completed, or that a replay brings back; and nothing deleted that should stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from ackfold.effects import (
    RetractPlan,
    RetractRefused,
    RetractRequest,
    UnknownRoots,
    retract_history,
    root_effects,
    run_retract,
)
from ackfold.ledger.commits import fence as fence_module
from ackfold.ledger.commits.fence import Fence, active
from ackfold.ledger.errors import LeaseLost
from ackfold.ledger.schema.tables import RETRACT_LOG
from tests.effects_ledger import (
    COUNTS_PER_ROOT,
    ROOTS_OF,
    WORDS_PER_ROOT,
    Ledger,
    effects_ledger,
)

DEAD = ROOTS_OF["dead"]
# The roots whose rows no retract may touch: every origin but the two free dead letters'.
KEPT = {f.origin for k, f in ROOTS_OF.items() if k not in ("dead", "other_dead")}


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return effects_ledger(tmp_path)


def _versions(ledger: Ledger) -> tuple[int, int]:
    return DeltaTable(ledger.words).version(), DeltaTable(ledger.counts).version()


def _log(ledger: Ledger) -> list[dict[str, object]]:
    path = f"{ledger.settings.table_root}/{RETRACT_LOG}"
    rows: list[dict[str, object]] = DeltaTable(path).to_pyarrow_table().to_pylist()
    return rows


def test_a_dry_run_is_the_default_and_shows_what_would_go(ledger: Ledger) -> None:
    shown: list[RetractPlan] = []
    before = _versions(ledger)
    summary = run_retract(
        ledger.settings, RetractRequest(root_ids=(DEAD.root_id,)), on_plan=shown.append
    )
    assert summary.dry_run
    assert shown[0].per_output() == {ledger.words: WORDS_PER_ROOT, ledger.counts: COUNTS_PER_ROOT}
    assert summary.deleted == {}
    assert _versions(ledger) == before  # nothing deleted
    assert _log(ledger) == []  # nothing logged


def test_a_retract_deletes_the_dead_letters_rows_in_one_commit_per_table_and_logs_them(
    ledger: Ledger,
) -> None:
    before = _versions(ledger)
    request = RetractRequest(root_ids=(DEAD.root_id,), dry_run=False, requested_by="cli:ann")
    summary = run_retract(ledger.settings, request)
    assert summary.deleted == {ledger.words: WORDS_PER_ROOT, ledger.counts: COUNTS_PER_ROOT}
    assert _versions(ledger) == (before[0] + 1, before[1] + 1)  # ONE commit per table
    assert DEAD.origin not in ledger.rows(ledger.words)
    assert DEAD.origin not in ledger.rows(ledger.counts, "origin")
    # Every other message's rows stay, the other dead letter's too (it was not asked).
    assert set(ledger.rows(ledger.words)) >= KEPT | {ROOTS_OF["other_dead"].origin}
    # The audit log: who, which root, which output, how many; planned, then deleted.
    log = sorted(_log(ledger), key=lambda r: (r["event"] != "planned", r["output"]))
    assert [(r["event"], r["output"], r["row_count"]) for r in log] == [
        ("planned", ledger.counts, COUNTS_PER_ROOT),
        ("planned", ledger.words, WORDS_PER_ROOT),
        ("deleted", ledger.counts, COUNTS_PER_ROOT),
        ("deleted", ledger.words, WORDS_PER_ROOT),
    ]
    assert {r["requested_by"] for r in log} == {"cli:ann"}
    assert {r["root_id"] for r in log} == {DEAD.root_id}
    assert log[1]["sample"]
    assert str(DEAD.origin) in str(log[1]["sample"])
    assert {r["table_version"] for r in log[2:]} == {before[0] + 1, before[1] + 1}
    history = retract_history(ledger.settings, root_id=DEAD.root_id)
    assert {r.event for r in history} == {"planned", "deleted"}
    assert not any(r.unconfirmed for r in history)
    # Again: the root has no effects left; nothing to delete, no commit.
    again = run_retract(ledger.settings, request)
    assert again.deleted == {}
    assert not again.plan.with_effects
    assert _versions(ledger) == (before[0] + 1, before[1] + 1)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("completed", "it is completed, not dead_lettered"),
        ("later_completed", "attempt 4 .* of its message completed \\(completed\\)"),
        ("late", "attempt 2 .* of its message completed \\(completed_late\\)"),
        ("registered", "attempt 4 .* is registered, not reconciled yet"),
        ("planned", "replay r-1 sends it back as root"),
    ],
)
def test_a_root_that_is_not_a_dead_letters_to_take_is_refused_and_nothing_is_deleted(
    ledger: Ledger, name: str, message: str
) -> None:
    root = ROOTS_OF[name]
    before = _versions(ledger)
    for dry_run in (True, False):
        request = RetractRequest(root_ids=(DEAD.root_id, root.root_id), dry_run=dry_run)
        with pytest.raises(RetractRefused, match=message) as refused:
            run_retract(ledger.settings, request)
        assert set(refused.value.refused) == {root.root_id}  # the dead letter is not blamed
    assert _versions(ledger) == before
    assert _log(ledger) == []


def test_a_selection_by_app_skips_the_refused_roots_and_retracts_the_dead_letters(
    ledger: Ledger,
) -> None:
    summary = run_retract(ledger.settings, RetractRequest(app="orders", dry_run=False))
    retracted = {r.root.root_id for r in summary.plan.roots}
    assert retracted == {DEAD.root_id, ROOTS_OF["other_dead"].root_id}
    assert summary.plan.skipped == {
        "an attempt of its message completed": 2,
        "its message is being replayed": 2,
    }
    assert summary.deleted == {
        ledger.words: 2 * WORDS_PER_ROOT,
        ledger.counts: 2 * COUNTS_PER_ROOT,
    }
    assert set(ledger.rows(ledger.words)) == KEPT  # exactly the dead letters' rows went
    # The outputs it cannot read are said, and nothing is deleted there.
    assert "no Delta table" in summary.plan.problems[ledger.missing]
    assert "has no column" in summary.plan.problems[ledger.nocolumn]
    assert DeltaTable(ledger.nocolumn).version() == 0


def test_an_unknown_root_is_named_and_a_root_without_effects_deletes_nothing(
    ledger: Ledger,
) -> None:
    with pytest.raises(UnknownRoots, match="0x000000000000002a"):
        run_retract(ledger.settings, RetractRequest(root_ids=(42,), dry_run=False))
    other = ROOTS_OF["other_dead"]
    run_retract(ledger.settings, RetractRequest(root_ids=(other.root_id,), dry_run=False))
    before = _versions(ledger)
    summary = run_retract(ledger.settings, RetractRequest(root_ids=(other.root_id,), dry_run=False))
    assert summary.deleted == {}
    assert _versions(ledger) == before


class Killed(BaseException):
    """The process dies here."""


def test_the_log_is_written_ahead_a_kill_before_the_delete_leaves_an_unconfirmed_record(
    ledger: Ledger,
) -> None:
    def kill(path: str, moment: str) -> None:
        if path == ledger.counts and moment == "before":  # the first output it deletes from
            raise Killed

    fence_module.COMMIT_HOOKS.append(kill)
    request = RetractRequest(root_ids=(DEAD.root_id,), dry_run=False, requested_by="cli:ann")
    try:
        with pytest.raises(Killed):
            run_retract(ledger.settings, request)
    finally:
        fence_module.COMMIT_HOOKS.remove(kill)
    assert ledger.rows(ledger.words)[DEAD.origin] == WORDS_PER_ROOT  # not deleted
    assert ledger.rows(ledger.counts, "origin")[DEAD.origin] == COUNTS_PER_ROOT
    history = retract_history(ledger.settings, root_id=DEAD.root_id)
    assert [r.event for r in history] == ["planned", "planned"]
    assert all(r.unconfirmed for r in history)  # the record says the delete is unconfirmed
    # Run again: it finishes, and its own record is confirmed.
    summary = run_retract(ledger.settings, request)
    assert summary.deleted[ledger.words] == WORDS_PER_ROOT
    confirmed = [r for r in retract_history(ledger.settings) if r.retract_id == summary.retract_id]
    assert {r.event for r in confirmed} == {"planned", "deleted"}


def test_a_run_that_lost_the_lease_deletes_nothing(ledger: Ledger) -> None:
    def lose(plan: RetractPlan) -> None:
        held = active(ledger.settings.table_root)
        assert held is not None
        held.lose("another run took the lease")

    before = _versions(ledger)
    request = RetractRequest(root_ids=(DEAD.root_id,), dry_run=False)
    with pytest.raises(LeaseLost):
        run_retract(ledger.settings, request, on_plan=lose)
    assert _versions(ledger) == before
    assert _log(ledger) == []  # not even its log


def test_a_newer_lease_on_an_output_stops_the_delete(ledger: Ledger) -> None:
    won: list[bool] = []

    def newer_run_wins(path: str, moment: str) -> None:
        # Between the log and the first delete, a newer run takes the lease and claims the
        # output (once: its claim is a commit, which comes here too).
        if path == ledger.counts and moment == "before" and not won:
            won.append(True)
            Fence(ledger.settings.table_root, epoch=10**6).claim([ledger.counts])

    fence_module.COMMIT_HOOKS.append(newer_run_wins)
    try:
        with pytest.raises(LeaseLost, match="lease epoch"):
            run_retract(ledger.settings, RetractRequest(root_ids=(DEAD.root_id,), dry_run=False))
    finally:
        fence_module.COMMIT_HOOKS.remove(newer_run_wins)
    assert ledger.rows(ledger.words)[DEAD.origin] == WORDS_PER_ROOT
    assert ledger.rows(ledger.counts, "origin")[DEAD.origin] == COUNTS_PER_ROOT
    assert {r["event"] for r in _log(ledger)} == {"planned"}  # nothing after the loss


def test_a_root_replayed_after_a_retract_starts_clean(ledger: Ledger) -> None:
    import pyarrow as pa

    run_retract(ledger.settings, RetractRequest(root_ids=(DEAD.root_id,), dry_run=False))
    # The replay's attempt writes its words with the sink's insert-only MERGE on
    # (origin_root_id, position), as replay-safe sinks do: every one of them lands.
    attempt = pa.table({
        "origin_root_id": pa.array([DEAD.origin] * WORDS_PER_ROOT, pa.int64()),
        "position": pa.array(range(WORDS_PER_ROOT), pa.int32()),
        "word": [f"again-{i}" for i in range(WORDS_PER_ROOT)],
    })  # fmt: skip
    (
        DeltaTable(ledger.words)
        .merge(attempt, "t.origin_root_id = s.origin_root_id AND t.position = s.position",
               source_alias="s", target_alias="t")
        .when_not_matched_insert_all()
        .execute()
    )  # fmt: skip
    words = root_effects(ledger.settings, DEAD.root_id, sample=10).outputs
    (found,) = [o for o in words if o.output.output == ledger.words]
    assert found.rows == WORDS_PER_ROOT  # the new attempt's rows, none of the old
    assert {row["word"] for row in found.sample} == {f"again-{i}" for i in range(WORDS_PER_ROOT)}


def test_a_retract_racing_a_replay_waits_for_its_turn_then_is_refused(ledger: Ledger) -> None:
    import threading

    from ackfold.ledger.commits.lease import ledger_turn
    from ackfold.ledger.schema.tables import REPLAY_LOG
    from tests.effects_ledger import planned_replay
    from tests.ledger_fixtures import write_rows

    waiting = threading.Event()
    outcome: list[BaseException] = []

    def retract() -> None:
        request = RetractRequest(root_ids=(DEAD.root_id,), dry_run=False)
        try:
            run_retract(ledger.settings, request, wait=60, say=lambda _: waiting.set())
        except BaseException as exc:  # the thread's outcome, checked below
            outcome.append(exc)

    with ledger_turn(ledger.settings, "a replay of the dead letter"):
        other = threading.Thread(target=retract)
        other.start()
        assert waiting.wait(60), "the retract waits for the replay's turn"
        # Meanwhile the replay plans the dead letter's next attempt.
        write_rows(ledger.settings.table_root, REPLAY_LOG, [planned_replay(DEAD)])
    other.join(120)
    (refused,) = outcome
    assert isinstance(refused, RetractRefused)
    assert "replay r-1 sends it back" in str(refused)
    assert ledger.rows(ledger.words)[DEAD.origin] == WORDS_PER_ROOT
    assert _log(ledger) == []


def test_an_output_a_stage_reads_is_counted_and_left_as_it_is(ledger: Ledger) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from ackfold.ledger.commits.outputs import declare_output

    # A stage's input (it carries the tuple column): a Delta stream reads it, which a
    # commit that removes rows would stop.
    staged = f"{ledger.settings.table_root}/staged"
    tuples = pa.array([{"id": 1}, {"id": 2}], pa.struct([("id", pa.int64())]))
    origins = pa.array([DEAD.origin] * 2, pa.int64())
    write_deltalake(staged, pa.table({"origin_root_id": origins, "_ackfold": tuples}))
    declare_output(ledger.settings.table_root, "orders", staged)
    found = root_effects(ledger.settings, DEAD.root_id)
    (shown,) = [o for o in found.outputs if o.output.output == staged]
    assert (shown.rows, shown.read_by_stage) == (2, True)
    assert all("_ackfold" not in row for row in shown.sample)
    summary = run_retract(ledger.settings, RetractRequest(root_ids=(DEAD.root_id,), dry_run=False))
    assert staged not in summary.deleted
    assert "a stage reads it" in summary.plan.kept[staged]
    assert summary.deleted[ledger.words] == WORDS_PER_ROOT
    assert DeltaTable(staged).version() == 0
    assert staged not in {r["output"] for r in _log(ledger)}
    # Its rows are the root's, but not effects a retract could take: none are left.
    after = root_effects(ledger.settings, DEAD.root_id)
    assert (after.rows, after.retractable_rows, after.has_effects) == (2, 0, False)


def test_an_output_where_sparks_commits_are_not_put_if_absent_is_refused(
    ledger: Ledger,
) -> None:
    from ackfold.config import load_settings
    from ackfold.effects.errors import OutputUnreadable
    from ackfold.effects.outputs import DeclaredOutput
    from ackfold.effects.retract import refuse_unsafe_store

    on_s3 = DeclaredOutput("orders", "s3a://lake/counted")
    with pytest.raises(OutputUnreadable, match="spark.delta.logStore.s3a.impl"):
        refuse_unsafe_store(ledger.settings, on_s3)
    dynamo = {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"}
    safe = load_settings(warehouse=ledger.settings.table_root, spark={"conf": dynamo})
    refuse_unsafe_store(safe, on_s3)  # put-if-absent through DynamoDB: no refusal
    refuse_unsafe_store(ledger.settings, DeclaredOutput("orders", ledger.words))  # local disk
