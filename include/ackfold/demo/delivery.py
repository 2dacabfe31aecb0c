"""The delivery report: what became of every message the demo sent, read from the ledger.

A message is followed from its source id to its first root (`roots.source_message_id`),
then along its chain of attempts (`origin_root_id`). It is *completed* if any attempt
completed, *dead-lettered* if its chain ended in `dead_letters`, and *lost* otherwise:
never registered, or still unsettled when the demo stopped. A message completed by more
than one attempt, or registered twice, is a duplicate: the at-least-once price, counted.

Dead letters are of two kinds. The feed's poison and stuck messages are *expected*: no
automatic attempt can process them. A healthy message that the faults hit on every one of
its attempts is *out of attempts*: the policy (`max_attempts`) dead-letters it on purpose,
with the reason of its last attempt, and the report names it so. Neither is a loss.

The word counts are compared for the messages that completed: the sink must hold exactly
their words. A dead letter may have left part of its words in the sink (an attempt that
got part-way); those are reported, not compared, and so are the dead letters' rows in
each of the app's declared outputs (`ackfold.effects`): what `ackfold retract` would
take back. Once they are retracted, the sink holds the completed messages' words alone.
The demo fails only on a loss or a wrong count (`DeliveryReport.ok`, in
`ackfold.demo.report`, which also writes the report's lines).

`follow` and `compare_words` are the logic, on plain values; `assess` reads the ledger and
the sink with Spark and calls them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ackfold.demo.feed import Feed
from ackfold.demo.report import DeliveryReport
from ackfold.ledger.reading.recovery import (
    RECOVERY_COLUMNS,
    RECOVERY_WHERE,
    recovery_times,
)
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import DEAD_LETTERS, ROOT_STATE, ROOTS, Ledger
from ackfold.spark.frames import local_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ackfold.config.policy import AppPolicy
    from ackfold.effects.outputs import DeclaredOutput

DONE = (status.COMPLETED, status.COMPLETED_LATE)
# A dead letter whose reason `dead_letters` does not hold (a ledger written by hand).
NO_REASON = "no reason recorded"


@dataclass(frozen=True)
class Followed:
    """What `follow` found: the report so far, and which origin roots (-> their seq)
    completed or were dead-lettered, for comparing the sink's words."""

    report: DeliveryReport
    completed: dict[int, int]
    dead: dict[int, int]


def follow(
    feed: Feed,
    message_ids: Sequence[str],
    roots: Iterable[Mapping[str, Any]],
    states: Mapping[int, str],
    dead_reasons: Mapping[int, str],
    *,
    faults: str = "",
) -> Followed:
    """Follow each sent message (`message_ids`, in feed order) through `roots` rows
    (root_id, attempt, origin_root_id, source_message_id) and their `states` (root id ->
    status), and sort it: completed, dead-lettered (expected, or out of attempts with
    `dead_reasons[origin root]`), or lost."""
    roots = list(roots)
    first = {r["source_message_id"]: r["root_id"] for r in roots if r["attempt"] == 1}
    chains: dict[int, dict[int, int]] = defaultdict(dict)  # origin -> attempt -> root
    registrations = Counter(r["root_id"] for r in roots)
    for r in roots:
        chains[r["origin_root_id"]][r["attempt"]] = r["root_id"]

    report = DeliveryReport(
        faults=faults, sent=len(message_ids), poison=len(feed.poison), stuck=len(feed.stuck)
    )
    expected = set(feed.dead_letters)
    completed: dict[int, int] = {}
    dead: dict[int, int] = {}
    reasons: Counter[str] = Counter()
    attempts: list[int] = []
    for message, message_id in zip(feed.messages, message_ids, strict=True):
        origin = first.get(message_id)
        if origin is None:
            report.lost += 1
            report.lost_seqs.append(message.seq)
            continue
        report.registered += 1
        chain = chains[origin]
        report.duplicates += sum(registrations[root] - 1 for root in chain.values())
        done = [a for a, root in chain.items() if states.get(root) in DONE]
        if len(chain) > 1:
            report.replayed += 1
        if done:
            report.duplicates += len(done) - 1
            completed[origin] = message.seq
            if 1 in done:
                report.completed_first_try += 1
            else:
                report.completed_after_replay += 1
        elif status.DEAD_LETTERED in {states.get(root) for root in chain.values()}:
            dead[origin] = message.seq
            report.dead_lettered += 1
            report.dead_lettered_seqs.append(message.seq)
            if message.seq in expected:
                report.expected_dead += 1
            else:
                report.out_of_attempts += 1
                report.out_of_attempts_seqs.append(message.seq)
                reasons[dead_reasons.get(origin) or NO_REASON] += 1
                attempts.append(max(chain))
        else:
            report.lost += 1
            report.lost_seqs.append(message.seq)
    dead_seqs = set(report.dead_lettered_seqs)
    report.expected_dead_missing = sorted(expected - dead_seqs)
    report.dead_lettered_seqs.sort()
    report.out_of_attempts_seqs.sort()
    report.out_of_attempts_reasons = dict(reasons)
    report.attempts_used = [min(attempts), max(attempts)] if attempts else []
    report.completed_messages = len(completed)
    return Followed(report, completed, dead)


def compare_words(
    report: DeliveryReport,
    feed: Feed,
    completed_seqs: Iterable[int],
    counted: Mapping[str, int],
    dead_letter_words: int = 0,
) -> None:
    """Compare `counted`, the sink's word counts for the completed messages, with the
    words of those messages (`completed_seqs`) in the input; record the words dead letters
    left in the sink (`dead_letter_words`), which are not compared."""
    expected = feed.counts_of(completed_seqs)
    report.words_expected = sum(expected.values())
    report.words_counted = sum(counted.values())
    report.word_mismatches = {
        word: (expected[word], counted.get(word, 0))
        for word in sorted(set(expected) | set(counted))
        if expected[word] != counted.get(word, 0)
    }
    report.words_exact = not report.word_mismatches
    report.dead_letter_words = dead_letter_words


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
    outputs: Sequence[DeclaredOutput] = (),
) -> DeliveryReport:
    """Follow every sent message through the ledger, and (unless `check_words` is off, as
    it is while the demo waits for its roots to settle) check the word counts and count
    the dead letters' rows in each of `outputs` (the app's declared outputs); with
    `policy_of` (each app's policy), measure the time to detect and to recover too."""
    from pyspark.sql import functions as F

    def table(name: str) -> Any:
        return spark.read.format("delta").load(ledger.path(name)).where(F.col("app") == app)

    roots = table(ROOTS).select("root_id", "attempt", "origin_root_id", "source_message_id")
    states = table(ROOT_STATE).select("root_id", "status").collect()
    # Ordered by attempt, so each chain keeps its latest dead letter's reason.
    letters = table(DEAD_LETTERS).select("origin_root_id", "attempt", "reason").orderBy("attempt")
    followed = follow(
        feed,
        message_ids,
        [r.asDict() for r in roots.collect()],
        {r["root_id"]: r["status"] for r in states},
        {r["origin_root_id"]: r["reason"] for r in letters.collect()},
        faults=faults,
    )
    if check_words:
        _check_words(spark, followed, feed, counted_path)
        found = _dead_letter_rows(spark, followed, outputs)
        followed.report.dead_letter_rows = {k: n for k, (n, read) in found.items() if not read}
        followed.report.dead_letter_rows_kept = {k: n for k, (n, read) in found.items() if read}
    report = followed.report
    if policy_of is not None:
        rows = (
            spark.read.format("delta").load(ledger.path(ROOT_STATE))
            .where(F.col("app") == app).where(RECOVERY_WHERE).select(*RECOVERY_COLUMNS).collect()
        )  # fmt: skip
        report.recovery = recovery_times([row.asDict() for row in rows], policy_of)
    return report


def _check_words(spark: SparkSession, followed: Followed, feed: Feed, path: str) -> None:
    """The sink's counts for this run's completed messages, and how many words its dead
    letters left there, then `compare_words`."""
    from pyspark.sql import functions as F

    outcomes = [(o, True) for o in followed.completed] + [(o, False) for o in followed.dead]
    mine = local_frame(spark, outcomes, "origin_root_id BIGINT, done BOOLEAN")
    rows = (
        spark.read.format("delta").load(path).join(F.broadcast(mine), "origin_root_id")
        .groupBy("done", "word").agg(F.count("*").alias("n")).collect()
    )  # fmt: skip
    counted = Counter({r["word"]: r["n"] for r in rows if r["done"]})
    dead_words = sum(r["n"] for r in rows if not r["done"])
    compare_words(followed.report, feed, followed.completed.values(), counted, dead_words)


def _dead_letter_rows(
    spark: SparkSession, followed: Followed, outputs: Sequence[DeclaredOutput]
) -> dict[str, tuple[int, bool]]:
    """Per declared output (its table's name), the rows of this run's dead letters there,
    by their origin in its origin column, and whether a stage reads it (it carries the
    tuple column)."""
    from pyspark.sql import functions as F

    from ackfold.effects.find import TUPLE_COLUMN

    if not outputs:
        return {}
    dead = local_frame(spark, [(o,) for o in followed.dead], "origin BIGINT")
    found: dict[str, tuple[int, bool]] = {}
    for output in outputs:
        table = spark.read.format("delta").load(output.output)
        origin = table[output.origin_column]  # a plain column name (`check_declaration`)
        rows = table.join(F.broadcast(dead), origin == dead["origin"], "left_semi").count()
        name = output.output.rstrip("/").rsplit("/", 1)[-1]
        found[name] = (rows, TUPLE_COLUMN in table.columns)
    return found
