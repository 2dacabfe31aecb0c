"""The delivery report of a demo run (`ackfold.demo.delivery` fills it): what became of
every message the demo sent, counted, and the lines the demo prints: the outcome, the
recovery times, the dead letters' rows left in the app's outputs, and the words compared.
`DeliveryReport.ok` is the demo's verdict: no loss, and the completed messages' words
exactly in the sink.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ackfold.ledger.reading.recovery import Percentiles, RecoveryTimes

# The fields that must be equal for two runs with one seed (not timings, not ids).
OUTCOME = (
    "sent", "poison", "stuck", "registered", "completed_first_try", "replayed",
    "completed_after_replay", "dead_lettered", "dead_lettered_seqs", "out_of_attempts",
    "duplicates", "lost", "words_expected", "words_exact", "queries_restarted",
)  # fmt: skip
# How many wrong words the report line names.
SHOWN_MISMATCHES = 5


@dataclass
class DeliveryReport:
    """What became of the messages of one demo run, counted; `lines()` prints it."""

    faults: str
    sent: int
    poison: int
    stuck: int = 0
    registered: int = 0
    completed_first_try: int = 0
    replayed: int = 0
    completed_after_replay: int = 0
    dead_lettered: int = 0  # every dead letter: expected + out of attempts
    dead_lettered_seqs: list[int] = field(default_factory=list)
    expected_dead: int = 0  # the poison and stuck messages among them
    expected_dead_missing: list[int] = field(default_factory=list)  # expected, yet not
    out_of_attempts: int = 0  # healthy messages the faults hit on every attempt
    out_of_attempts_seqs: list[int] = field(default_factory=list)
    out_of_attempts_reasons: dict[str, int] = field(default_factory=dict)  # last attempt's
    attempts_used: list[int] = field(default_factory=list)  # [fewest, most] of those
    duplicates: int = 0
    lost: int = 0
    lost_seqs: list[int] = field(default_factory=list)
    completed_messages: int = 0  # the messages whose words are compared
    words_expected: int = 0
    words_counted: int = 0
    words_exact: bool = False
    word_mismatches: dict[str, tuple[int, int]] = field(default_factory=dict)
    dead_letter_words: int = 0  # words dead letters left in the sink: not compared
    # The dead letters' rows per declared output (its table's name), when it declares any:
    # in the outputs people read (a retract takes them back), and in those a stage reads
    # (`words`: a retract leaves them, a delete would stop the stage's stream).
    dead_letter_rows: dict[str, int] = field(default_factory=dict)
    dead_letter_rows_kept: dict[str, int] = field(default_factory=dict)
    queries_restarted: int = 0
    cycles: int = 0
    seconds: float = 0.0
    # Time to detect and to recover (`ackfold.ledger.reading.recovery`): timings, not outcomes.
    recovery: RecoveryTimes | None = None

    @property
    def settled(self) -> int:
        return self.completed_first_try + self.completed_after_replay + self.dead_lettered

    @property
    def ok(self) -> bool:
        """Nothing lost and every completed message counted exactly: what the demo's exit
        status says. Dead letters, expected or out of attempts, are not failures."""
        return self.lost == 0 and self.words_exact

    def outcome(self) -> dict[str, Any]:
        """What a run with the same seed must reproduce exactly."""
        return {name: getattr(self, name) for name in OUTCOME}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        width = len(f"{self.sent:,}")

        def row(label: str, n: int, note: str = "") -> str:
            return f"  {label:<28}{n:>{width},}{'   ' + note if note else ''}"

        dead = [row("dead-lettered", self.dead_lettered, self._expected_note())]
        if self.out_of_attempts:
            dead = [
                row("dead-lettered", self.dead_lettered),
                row("  poison and stuck", self.expected_dead, self._expected_note()),
                row("  out of attempts", self.out_of_attempts, self._attempts_note()),
                *(
                    f"      {n:>{width},}  {reason}"
                    for reason, n in sorted(
                        self.out_of_attempts_reasons.items(), key=lambda item: (-item[1], item[0])
                    )
                ),
            ]
        return [
            f"Delivery report ({self.faults}; {self.cycles} cycles, {self.seconds:.0f} s)",
            row("messages sent", self.sent, self._faulty()),
            row("completed on the first try", self.completed_first_try),
            row("replayed", self.replayed, "needed at least one more attempt"),
            row("completed after a replay", self.completed_after_replay),
            *dead,
            row("duplicates", self.duplicates, "processed more than once, counted once"),
            row("lost", self.lost, "must be 0" if self.lost else ""),
            f"  word counts: {self._words()}",
            *self._effects_lines(),
            *self._recovery_lines(),
        ]

    def _effects_lines(self) -> list[str]:
        if not self.dead_letter_rows and not self.dead_letter_rows_kept:
            return []
        rows = ", ".join(f"{name} {n:,}" for name, n in self.dead_letter_rows.items())
        kept = ", ".join(f"{name} {n:,}" for name, n in self.dead_letter_rows_kept.items())
        kept = f"; {kept} in what a stage reads (left)" if kept else ""
        if not any(self.dead_letter_rows.values()):
            return [f"  {'dead letters left':<28}no rows in the outputs ({rows}){kept}"]
        return [
            f"  {'dead letters left':<28}{rows} rows in the outputs; `ackfold retract` "
            f"takes them back{kept}"
        ]

    def _recovery_lines(self) -> list[str]:
        if self.recovery is None:
            return []
        return [
            _times("time to detect", self.recovery.detect, "roots", "due -> marked"),
            _times("time to recover", self.recovery.recover, "messages", "due -> replay done"),
        ]

    def _faulty(self) -> str:
        stuck = f", {self.stuck} stuck (replay them by hand)" if self.stuck else ""
        return f"{self.poison} of them poison{stuck}"

    def _expected_note(self) -> str:
        what = "poison and stuck" if self.stuck else "poison"
        if self.expected_dead_missing:
            return (
                f"{self.expected_dead} of the {self.poison + self.stuck} {what} messages; "
                f"seqs {self.expected_dead_missing} were not dead-lettered"
            )
        return f"exactly the {what} messages" if self.poison + self.stuck else ""

    def _attempts_note(self) -> str:
        fewest, most = self.attempts_used or [0, 0]
        tries = f"{most}" if fewest == most else f"{fewest}-{most}"
        return f"healthy, but failed or timed out on all {tries} attempts; by last reason:"

    def _words(self) -> str:
        scope = (
            f"{self.words_counted:,} words counted, {self.words_expected:,} in the "
            f"{self.completed_messages:,} completed messages"
        )
        if self.dead_letter_words:
            scope += (
                f"; {self.dead_letter_words:,} words that dead letters got into the sink "
                "before they ran out of attempts, not compared"
            )
        if self.words_exact:
            return f"exact ({scope})"
        wrong = ", ".join(
            f"{word!r} {want} expected, {got} counted"
            for word, (want, got) in list(self.word_mismatches.items())[:SHOWN_MISMATCHES]
        )
        more = len(self.word_mismatches) - SHOWN_MISMATCHES
        wrong += f", and {more} more" if more > 0 else ""
        return f"WRONG for {len(self.word_mismatches)} word(s): {wrong} ({scope})"


def _times(label: str, times: Percentiles, of: str, span: str) -> str:
    if not times.count:
        return f"  {label:<28}none"
    p50, p99 = times.p50 or 0.0, times.p99 or 0.0
    return f"  {label:<28}p50 {p50:.1f} s, p99 {p99:.1f} s   {times.count:,} {of}, {span}"
