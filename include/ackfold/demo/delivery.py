"""The delivery report: what became of every message the demo sent, read from the ledger.

A message is followed from its SQS id to its first root (`roots.source_message_id`), then
along its chain of attempts (`origin_root_id`). It is *completed* if any attempt
completed, *dead-lettered* if its chain ended in `dead_letters`, and *lost* otherwise:
never registered, or still unsettled when the demo stopped. A message completed by more
than one attempt, or registered twice, is a duplicate: the at-least-once price, counted.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ackfold.demo.feed import Feed
from ackfold.ledger import status
from ackfold.ledger.recovery import (
    RECOVERY_COLUMNS,
    RECOVERY_WHERE,
    Percentiles,
    RecoveryTimes,
    recovery_times,
)
from ackfold.ledger.tables import ROOT_STATE, ROOTS, Ledger

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ackfold.config.policy import AppPolicy

DONE = (status.COMPLETED, status.COMPLETED_LATE)
# The fields that must be equal for two runs with one seed (not timings, not ids).
OUTCOME = (
    "sent", "poison", "stuck", "registered", "completed_first_try", "replayed",
    "completed_after_replay", "dead_lettered", "dead_lettered_seqs", "duplicates", "lost",
    "words_expected", "words_exact", "queries_restarted",
)  # fmt: skip


@dataclass
class DeliveryReport:
    faults: str
    sent: int
    poison: int
    stuck: int = 0
    registered: int = 0
    completed_first_try: int = 0
    replayed: int = 0
    completed_after_replay: int = 0
    dead_lettered: int = 0
    dead_lettered_seqs: list[int] = field(default_factory=list)
    duplicates: int = 0
    lost: int = 0
    lost_seqs: list[int] = field(default_factory=list)
    words_expected: int = 0
    words_counted: int = 0
    words_exact: bool = False
    word_mismatches: dict[str, tuple[int, int]] = field(default_factory=dict)
    queries_restarted: int = 0
    cycles: int = 0
    seconds: float = 0.0
    # Time to detect and to recover (`ackfold.ledger.recovery`): timings, not outcomes.
    recovery: RecoveryTimes | None = None

    @property
    def settled(self) -> int:
        return self.completed_first_try + self.completed_after_replay + self.dead_lettered

    def outcome(self) -> dict[str, Any]:
        """What a run with the same seed must reproduce exactly."""
        return {name: getattr(self, name) for name in OUTCOME}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self, expected_dead: Sequence[int]) -> list[str]:
        dead = "exactly the poison messages"
        if self.stuck:
            dead = "exactly the poison and stuck messages"
        if self.dead_lettered_seqs != sorted(expected_dead):
            dead = f"seqs {self.dead_lettered_seqs}; expected {sorted(expected_dead)}"
        words = "exact" if self.words_exact else f"WRONG for {len(self.word_mismatches)} word(s)"
        width = len(f"{self.sent:,}")

        def row(label: str, n: int, note: str = "") -> str:
            return f"  {label:<28}{n:>{width},}{'   ' + note if note else ''}"

        return [
            f"Delivery report ({self.faults}; {self.cycles} cycles, {self.seconds:.0f} s)",
            row("messages sent", self.sent, self._faulty()),
            row("completed on the first try", self.completed_first_try),
            row("replayed", self.replayed, "needed at least one more attempt"),
            row("completed after a replay", self.completed_after_replay),
            row("dead-lettered", self.dead_lettered, dead),
            row("duplicates", self.duplicates, "processed more than once, counted once"),
            row("lost", self.lost, "must be 0" if self.lost else ""),
            f"  word counts: {words} ({self.words_counted:,} words counted, "
            f"{self.words_expected:,} in the input without the dead letters)",
            *self._recovery_lines(),
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


def _times(label: str, times: Percentiles, of: str, span: str) -> str:
    if not times.count:
        return f"  {label:<28}none"
    p50, p99 = times.p50 or 0.0, times.p99 or 0.0
    return f"  {label:<28}p50 {p50:.1f} s, p99 {p99:.1f} s   {times.count:,} {of}, {span}"


def assess(
    spark: SparkSession,
    ledger: Ledger,
    app: str,
    feed: Feed,
    message_ids: Sequence[str],
    counted_path: str,
    *,
    faults: str = "",
    check_words: bool = True,
    policy_of: Callable[[str], AppPolicy] | None = None,
) -> DeliveryReport:
    """Follow every sent message through the ledger, and (unless `check_words` is off, as
    it is while the demo waits for its roots to settle) check the word counts; with
    `policy_of` (each app's policy), measure the time to detect and to recover too."""
    from pyspark.sql import functions as F

    roots = (
        spark.read.format("delta").load(ledger.path(ROOTS)).where(F.col("app") == app)
        .select("root_id", "attempt", "origin_root_id", "source_message_id").collect()
    )  # fmt: skip
    states = {
        r["root_id"]: r["status"]
        for r in spark.read.format("delta").load(ledger.path(ROOT_STATE))
        .where(F.col("app") == app).select("root_id", "status").collect()
    }  # fmt: skip
    first = {r["source_message_id"]: r["root_id"] for r in roots if r["attempt"] == 1}
    chains: dict[int, dict[int, int]] = defaultdict(dict)  # origin -> attempt -> root
    registrations = Counter(r["root_id"] for r in roots)
    for r in roots:
        chains[r["origin_root_id"]][r["attempt"]] = r["root_id"]

    report = DeliveryReport(
        faults=faults, sent=len(message_ids), poison=len(feed.poison), stuck=len(feed.stuck)
    )
    origins: dict[int, int] = {}  # origin -> seq, for the messages of this run
    for message, message_id in zip(feed.messages, message_ids, strict=True):
        origin = first.get(message_id)
        if origin is None:
            report.lost += 1
            report.lost_seqs.append(message.seq)
            continue
        report.registered += 1
        origins[origin] = message.seq
        chain = chains[origin]
        report.duplicates += sum(registrations[root] - 1 for root in chain.values())
        done = [a for a, root in chain.items() if states.get(root) in DONE]
        if len(chain) > 1:
            report.replayed += 1
        if done:
            report.duplicates += len(done) - 1
            if 1 in done:
                report.completed_first_try += 1
            else:
                report.completed_after_replay += 1
        elif status.DEAD_LETTERED in {states.get(root) for root in chain.values()}:
            report.dead_lettered += 1
            report.dead_lettered_seqs.append(message.seq)
        else:
            report.lost += 1
            report.lost_seqs.append(message.seq)
    report.dead_lettered_seqs.sort()
    if check_words:
        _check_words(spark, report, feed, origins, counted_path)
    if policy_of is not None:
        rows = (
            spark.read.format("delta").load(ledger.path(ROOT_STATE))
            .where(F.col("app") == app).where(RECOVERY_WHERE).select(*RECOVERY_COLUMNS).collect()
        )  # fmt: skip
        report.recovery = recovery_times([row.asDict() for row in rows], policy_of)
    return report


def _check_words(
    spark: SparkSession, report: DeliveryReport, feed: Feed, origins: dict[int, int], path: str
) -> None:
    """Compare the sink's counts for this run's messages with the counts of the input."""
    from pyspark.sql import functions as F

    expected = feed.true_counts()
    mine = spark.createDataFrame([(o,) for o in origins] or [(0,)], "origin_root_id BIGINT")
    rows = (
        spark.read.format("delta").load(path).join(F.broadcast(mine), "origin_root_id")
        .groupBy("word").agg(F.count("*").alias("n")).collect()
    )  # fmt: skip
    counted = Counter({r["word"]: r["n"] for r in rows})
    report.words_expected = sum(expected.values())
    report.words_counted = sum(counted.values())
    report.word_mismatches = {
        word: (expected[word], counted[word])
        for word in sorted(set(expected) | set(counted))
        if expected[word] != counted[word]
    }
    report.words_exact = not report.word_mismatches
