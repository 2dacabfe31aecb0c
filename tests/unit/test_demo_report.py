"""The demo's delivery report on constructed ledgers (no JVM): expected dead letters, dead
letters out of attempts and losses told apart; words compared for completed messages only;
a failure only on a loss or a wrong count (issue 21, item 4)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ackfold.config.demo import FaultSettings
from ackfold.demo.delivery import compare_words, follow
from ackfold.demo.feed import Feed, tokens
from ackfold.demo.report import DeliveryReport
from ackfold.ledger.schema import status

FEED = Feed.build(10, FaultSettings(seed=3, poison=1, stuck=1))
POISON, STUCK = FEED.poison[0], min(FEED.stuck)
HEALTHY = [m.seq for m in FEED.messages if m.seq not in FEED.dead_letters]
IDS = [f"msg-{seq}" for seq in range(len(FEED.messages))]
MALFORMED = "failed in split: malformed message: not JSON with a seq and a text"
OUTAGE = "failed in count: injected outage at count: fails on every automatic attempt"
AT_COUNT = "failed in count: injected failure at count"
TIMED_OUT = "timed out after stage split"


class Ledger:
    """`roots` rows, root states and dead-letter reasons, built one message at a time."""

    def __init__(self) -> None:
        self.roots: list[dict[str, Any]] = []
        self.states: dict[int, str] = {}
        self.reasons: dict[int, str] = {}

    def message(self, seq: int, *outcomes: str, reason: str | None = None) -> None:
        """Register `seq`'s attempts, one per outcome (the status its root ended in)."""
        origin = 1000 * (seq + 1) + 1
        for attempt, outcome in enumerate(outcomes, 1):
            root = origin if attempt == 1 else 1000 * (seq + 1) + attempt
            message_id = IDS[seq] if attempt == 1 else f"replay-{root}"
            self.roots.append(
                {
                    "root_id": root,
                    "attempt": attempt,
                    "origin_root_id": origin,
                    "source_message_id": message_id,
                }
            )
            self.states[root] = outcome
        if reason is not None:
            self.reasons[origin] = reason

    def dead_after(self, seq: int, attempts: int, reason: str) -> None:
        self.message(seq, *[status.REPLAYED] * (attempts - 1), status.DEAD_LETTERED, reason=reason)

    def report(
        self, counted: Counter[str] | None = None, dead_letter_words: int = 0
    ) -> DeliveryReport:
        followed = follow(FEED, IDS, self.roots, self.states, self.reasons, faults="harsh")
        if counted is None:
            counted = FEED.counts_of(followed.completed.values())
        compare_words(
            followed.report, FEED, followed.completed.values(), counted, dead_letter_words
        )
        return followed.report


def harsh() -> Ledger:
    """Issue 21's run, in small: poison and stuck dead-lettered, two healthy messages out
    of attempts (one left part of its words in the sink), the rest completed."""
    ledger = Ledger()
    ledger.dead_after(POISON, 5, MALFORMED)
    ledger.dead_after(STUCK, 5, OUTAGE)
    ledger.dead_after(HEALTHY[0], 5, AT_COUNT)
    ledger.dead_after(HEALTHY[1], 5, TIMED_OUT)
    ledger.message(HEALTHY[2], status.REPLAYED, status.COMPLETED)
    for seq in HEALTHY[3:]:
        ledger.message(seq, status.COMPLETED)
    return ledger


def partial_words() -> int:
    """How many words the first exhausted message left in the sink: all but its last."""
    text = FEED.messages[HEALTHY[0]].text
    assert text is not None
    return len(tokens(text)) - 1


def test_dead_letters_out_of_attempts_are_named_with_their_reasons_and_are_no_loss() -> None:
    # Before, every healthy message's words were expected in the sink: the exhausted
    # message's missing word made this run "WRONG", and the demo exit 1.
    report = harsh().report(dead_letter_words=partial_words())
    assert report.ok
    assert report.lost == 0
    assert report.dead_lettered == 4
    assert report.dead_lettered_seqs == sorted([POISON, STUCK, *HEALTHY[:2]])
    assert report.expected_dead == 2
    assert report.expected_dead_missing == []
    assert report.out_of_attempts == 2
    assert report.out_of_attempts_seqs == sorted(HEALTHY[:2])
    assert report.out_of_attempts_reasons == {AT_COUNT: 1, TIMED_OUT: 1}
    assert report.attempts_used == [5, 5]
    assert report.completed_messages == len(HEALTHY) - 2
    assert report.completed_after_replay == 1
    assert report.replayed == 5  # the four dead letters and the one completed on attempt 2
    assert report.words_exact
    assert (
        report.words_expected == report.words_counted == sum(FEED.counts_of(HEALTHY[2:]).values())
    )
    assert report.dead_letter_words == partial_words()

    lines = report.lines()
    text = "\n".join(lines)
    assert "  dead-lettered" in lines[5]
    assert lines[6].split()[:4] == ["poison", "and", "stuck", "2"]
    assert "exactly the poison and stuck messages" in lines[6]
    assert lines[7].split()[:4] == ["out", "of", "attempts", "2"]
    assert "failed or timed out on all 5 attempts" in lines[7]
    assert sorted(line.split(maxsplit=1)[1] for line in lines[8:10]) == sorted(
        [AT_COUNT, TIMED_OUT]
    )
    assert any(line.split()[:2] == ["lost", "0"] for line in lines)
    assert "word counts: exact" in text
    assert f"{partial_words()} words that dead letters got into the sink" in text


def test_the_report_counts_the_dead_letters_rows_per_declared_output() -> None:
    report = harsh().report(dead_letter_words=partial_words())
    assert not any("dead letters left" in line for line in report.lines()), "none declared"
    report.dead_letter_rows = {"counted": partial_words()}
    report.dead_letter_rows_kept = {"words": 14}
    (line,) = [line for line in report.lines() if "dead letters left" in line]
    assert f"counted {partial_words()} rows in the outputs" in line
    assert "`ackfold retract` takes them back; words 14 in what a stage reads (left)" in line
    # Once retracted: the sink holds the completed messages' words alone.
    report = harsh().report(dead_letter_words=0)
    report.dead_letter_rows = {"counted": 0}
    text = "\n".join(report.lines())
    assert "dead letters left           no rows in the outputs (counted 0)" in text
    assert "not compared" not in text
    assert report.ok


def test_a_wrong_count_of_a_completed_message_fails_and_names_the_word() -> None:
    counted = FEED.counts_of(HEALTHY[2:])
    word = next(iter(counted))
    counted[word] -= 1
    report = harsh().report(counted)
    assert not report.ok
    assert report.word_mismatches == {word: (counted[word] + 1, counted[word])}
    line = report.lines()[-1]
    assert line.startswith(f"  word counts: WRONG for 1 word(s): {word!r} ")
    assert f"{counted[word] + 1} expected, {counted[word]} counted" in line


def test_a_word_counted_for_no_completed_message_is_wrong() -> None:
    counted = FEED.counts_of(HEALTHY[2:]) + Counter({"zzz": 1})
    report = harsh().report(counted)
    assert report.word_mismatches == {"zzz": (0, 1)}
    assert not report.ok


def test_unregistered_and_unsettled_messages_are_lost_and_fail() -> None:
    ledger = Ledger()
    ledger.dead_after(POISON, 5, MALFORMED)
    ledger.dead_after(STUCK, 5, OUTAGE)
    never, unsettled, *rest = HEALTHY
    ledger.message(unsettled, status.REPLAYED, status.PENDING)
    for seq in rest:
        ledger.message(seq, status.COMPLETED)
    report = ledger.report()
    assert report.lost == 2
    assert report.lost_seqs == sorted([never, unsettled])
    assert report.out_of_attempts == 0
    assert report.words_exact  # the lost messages' words are not expected
    assert not report.ok
    assert any(line.split()[:3] == ["lost", "2", "must"] for line in report.lines())


def test_without_exhausted_messages_the_dead_letters_are_one_line() -> None:
    ledger = Ledger()
    ledger.dead_after(POISON, 5, MALFORMED)
    ledger.dead_after(STUCK, 5, OUTAGE)
    for seq in HEALTHY:
        ledger.message(seq, status.COMPLETED)
    lines = ledger.report().lines()
    (dead,) = [line for line in lines if "dead-lettered" in line]
    assert dead.split()[:2] == ["dead-lettered", "2"]
    assert dead.endswith("exactly the poison and stuck messages")
    assert not any("out of attempts" in line for line in lines)


def test_an_expected_dead_letter_that_completed_is_named_but_no_failure() -> None:
    # A stuck message replayed by hand before the report: not dead-lettered, not lost.
    ledger = Ledger()
    ledger.dead_after(POISON, 5, MALFORMED)
    ledger.message(STUCK, *[status.REPLAYED] * 5, status.COMPLETED)
    for seq in HEALTHY:
        ledger.message(seq, status.COMPLETED)
    report = ledger.report()
    assert report.ok
    assert report.expected_dead_missing == [STUCK]
    (dead,) = [line for line in report.lines() if "dead-lettered" in line]
    assert f"1 of the 2 poison and stuck messages; seqs [{STUCK}] were not dead-lettered" in dead


def test_a_dead_letter_without_a_recorded_reason_is_still_named() -> None:
    ledger = Ledger()
    ledger.message(HEALTHY[0], status.REPLAYED, status.DEAD_LETTERED)
    report = ledger.report()
    assert report.out_of_attempts_reasons == {"no reason recorded": 1}
    assert report.attempts_used == [2, 2]


def test_a_message_completed_by_two_attempts_is_one_completion_and_one_duplicate() -> None:
    # Attempt 1 timed out and was replayed, then completed late; attempt 2 completed too.
    ledger = Ledger()
    ledger.message(HEALTHY[0], status.COMPLETED_LATE, status.COMPLETED)
    report = ledger.report()
    assert report.completed_first_try == 1
    assert report.duplicates == 1
    assert report.completed_messages == 1
