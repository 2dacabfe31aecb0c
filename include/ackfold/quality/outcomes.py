"""The outcome of an overdue root: settled (and how), still legitimately under way, or lost.

A root that should have settled by now (its timeout and grace have passed) is settled when
it ended in one of `SETTLED_OUTCOMES`; anything else is lost, and its outcome says why
("replayed, but the next attempt never registered"), so that Data Docs show the reason
itself. `ackfold.quality.batches` joins what the classification reads; the expectation
(`ackfold.quality.expectations`) checks the outcome is in the set.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ackfold.config.policy import AppPolicy
from ackfold.ledger.schema import status
from ackfold.sources.base import EXPIRED

if TYPE_CHECKING:
    from pyspark.sql import Column

# An overdue root is settled when it ended in one of these, or is still legitimately
# under way (`IN_PROGRESS`, `AWAITING_REPLAY`); anything else is lost.
IN_PROGRESS: Final = "in progress (events within its idle timeout)"
AWAITING_REPLAY: Final = "awaiting its replay (backoff)"
# Dead-lettered at once because its source has no sender: settled (nothing could replay
# it), and Data Docs say why (`ackfold.replay.senders`; its reason starts `NO_SENDER`).
NO_SENDER_OUTCOME: Final = "dead_lettered: its source has no sender (see ackfold.senders)"
SETTLED_OUTCOMES: Final = (
    status.COMPLETED,
    status.COMPLETED_LATE,
    status.REPLAYED,
    status.DEAD_LETTERED,
    NO_SENDER_OUTCOME,
    IN_PROGRESS,
    AWAITING_REPLAY,
)


def overdue_outcome(policy: AppPolicy, now: datetime) -> Column:
    """The `outcome` of an overdue root of `policy`'s app at `now`: its status if that
    settles it, `IN_PROGRESS` or `AWAITING_REPLAY`, else why it counts as lost.

    Reads the root's `root_state` columns (`status`, `status_changed_at`, `first_event_at`,
    `last_event_at`, `fail_at`), its `attempt`, `next_registered` (the next attempt is
    registered), `expired` (dead-lettered because the source deleted the message) and
    `no_sender` (dead-lettered because its source has no sender)."""
    from pyspark.sql import functions as F

    grace = policy.quality.grace
    # A replay sent within the grace period may not have been consumed yet.
    replay_in_flight = F.col("status_changed_at") >= F.lit(now - grace)
    # The automatic replay of attempt k waits replay_backoff * 2**(k-1) after it failed
    # or timed out; the last attempt is dead-lettered at once. The wait counts from when
    # the root was due (its fail event, or its timeout), not from when a reconcile saw
    # it: a root that a reconciler outage timed out days late is owed no more time.
    backoff = F.when(F.col("attempt") >= policy.max_attempts, F.lit(0.0)).otherwise(
        F.lit(policy.replay_backoff.total_seconds()) * F.pow(F.lit(2), F.col("attempt") - 1)
    )
    due = F.least(F.col("status_changed_at"), F.coalesce(F.col("fail_at"), timeout_due(policy)))
    waited = F.unix_micros(F.lit(now)) - F.unix_micros(due)
    awaiting = waited / 1e6 <= backoff + F.lit(grace.total_seconds())
    active = F.lit(False)
    if policy.idle_timeout is not None:  # pending past the timeout while events come
        active = F.col("last_event_at") >= F.lit(now - policy.idle_timeout - grace)
    replayed = F.col("status") == status.REPLAYED
    open_ = F.col("status").isin(status.FAILED, status.TIMED_OUT)
    return (
        F.when(F.col("status").isNull(), F.lit("never reconciled: no event of it folded"))
        .when(
            F.col("expired") & (F.col("status") == status.DEAD_LETTERED),
            F.lit(f"dead-lettered: {EXPIRED} before its replay"),
        )
        .when(
            F.col("no_sender") & (F.col("status") == status.DEAD_LETTERED),
            F.lit(NO_SENDER_OUTCOME),
        )
        .when(F.col("status").isin(*SETTLED_OUTCOMES) & ~replayed, F.col("status"))
        .when(replayed & (F.col("next_registered") | replay_in_flight), F.col("status"))
        .when(replayed, F.lit("replayed, but the next attempt never registered"))
        .when(open_ & awaiting, F.lit(AWAITING_REPLAY))
        .when(F.col("status") == status.FAILED, F.lit("failed, and not replayed"))
        .when(F.col("status") == status.TIMED_OUT, F.lit("timed out, and not replayed"))
        .when((F.col("status") == status.PENDING) & active, F.lit(IN_PROGRESS))
        .otherwise(F.concat(F.col("status"), F.lit(" past its timeout")))
    )


def timeout_due(policy: AppPolicy) -> Column:
    """When a root of `policy`'s app times out if nothing more happens: its timeout after
    its first event, and its idle timeout after its latest, whichever comes later."""
    from pyspark.sql import functions as F

    due = F.col("first_event_at") + F.expr(
        f"INTERVAL '{policy.timeout.total_seconds():.6f}' SECOND"
    )
    if policy.idle_timeout is None:
        return due
    idle = F.expr(f"INTERVAL '{policy.idle_timeout.total_seconds():.6f}' SECOND")
    return F.greatest(due, F.col("last_event_at") + idle)


def overdue_outcome_sql(policy: AppPolicy, now: datetime) -> tuple[str, dict[str, Any]]:
    """The `outcome` of an overdue root as a SQL expression over `s` (its `root_state`
    row), `o` (its attempt), `n` (its next attempt, if registered), `x` (dead-lettered
    because the source deleted it) and `y` (dead-lettered because its source has no
    sender), with its named parameters: the same rules as
    `overdue_outcome`, for the embedded engine (`ackfold.quality.duck_batches`)."""
    grace = policy.quality.grace
    params: dict[str, Any] = {}

    def bind(value: Any) -> str:
        name = f"o{len(params)}"
        params[name] = value
        return "$" + name

    timeout_due = f"s.first_event_at + to_microseconds({bind(_micros(policy.timeout))})"
    if policy.idle_timeout is not None:
        idle = f"s.last_event_at + to_microseconds({bind(_micros(policy.idle_timeout))})"
        timeout_due = f"greatest({timeout_due}, {idle})"
    # The wait counts from when the root was due (its fail event, or its timeout).
    due = f"least(s.status_changed_at, coalesce(s.fail_at, {timeout_due}))"
    backoff = (
        f"CASE WHEN o.attempt >= {bind(policy.max_attempts)} THEN 0.0 "
        f"ELSE {bind(policy.replay_backoff.total_seconds())} * pow(2, o.attempt - 1) END"
    )
    awaiting = (
        f"(epoch_us({bind(now)}) - epoch_us({due})) / 1e6 "
        f"<= {backoff} + {bind(grace.total_seconds())}"
    )
    active = "false"
    if policy.idle_timeout is not None:  # pending past the timeout while events come
        active = f"s.last_event_at >= {bind(now - policy.idle_timeout - grace)}"
    in_flight = f"s.status_changed_at >= {bind(now - grace)}"
    settled = ", ".join(bind(o) for o in SETTLED_OUTCOMES)
    replayed, dead = bind(status.REPLAYED), bind(status.DEAD_LETTERED)
    failed, timed_out, pending = bind(status.FAILED), bind(status.TIMED_OUT), bind(status.PENDING)
    case = (
        f"CASE WHEN s.status IS NULL THEN {bind('never reconciled: no event of it folded')} "
        f"WHEN x.root_id IS NOT NULL AND s.status = {dead} "
        f"  THEN {bind(f'dead-lettered: {EXPIRED} before its replay')} "
        f"WHEN y.root_id IS NOT NULL AND s.status = {dead} THEN {bind(NO_SENDER_OUTCOME)} "
        f"WHEN s.status IN ({settled}) AND s.status <> {replayed} THEN s.status "
        f"WHEN s.status = {replayed} AND (n.attempt IS NOT NULL OR {in_flight}) THEN s.status "
        f"WHEN s.status = {replayed} "
        f"  THEN {bind('replayed, but the next attempt never registered')} "
        f"WHEN s.status IN ({failed}, {timed_out}) AND {awaiting} THEN {bind(AWAITING_REPLAY)} "
        f"WHEN s.status = {failed} THEN {bind('failed, and not replayed')} "
        f"WHEN s.status = {timed_out} THEN {bind('timed out, and not replayed')} "
        f"WHEN s.status = {pending} AND {active} THEN {bind(IN_PROGRESS)} "
        f"ELSE s.status || {bind(' past its timeout')} END"
    )
    return case, params


def _micros(value: timedelta) -> int:
    return int(value / timedelta(microseconds=1))
