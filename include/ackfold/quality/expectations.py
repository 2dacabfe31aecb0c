"""The expectations: what must hold of each batch (`ackfold.quality.batches`).

Each expectation carries a `description` (what Data Docs and the CLI show) and, in its
`meta`, a stable `check` name (what `quality_results` records). The ledger soundness
suites are the same for every ledger; the delivery suites take each app's thresholds.

Example:
    >>> [suite.name for suite in delivery_suites(AppPolicy(), "orders")]
    ['delivery.orders.overdue_roots', 'delivery.orders.sent_messages', 'delivery.orders.rates']
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ackfold.config.policy import AppPolicy
from ackfold.ledger.schema import status
from ackfold.ledger.schema.contract import EVENT_KINDS
from ackfold.ledger.schema.tables import (
    ACK_EVENTS_DDL,
    ROOT_STATE_DDL,
    ROOTS_DDL,
    ROOTS_V1_COLUMNS,
    column_specs,
)
from ackfold.quality.batches import VALID_CHAIN
from ackfold.quality.outcomes import SETTLED_OUTCOMES

# Before GX is imported anywhere: no usage statistics leave the machine.
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

if TYPE_CHECKING:
    from great_expectations.expectations.expectation import Expectation

_SPARK_TYPES: Final = {
    "STRING": "StringType",
    "BIGINT": "LongType",
    "INT": "IntegerType",
    "BOOLEAN": "BooleanType",
    "TIMESTAMP": "TimestampType",
    "DATE": "DateType",
}
# root_state's contract columns (DESIGN.md) end with fail_reason; the rest are the
# reconciler's own bookkeeping.
ROOT_STATE_CONTRACT: Final = [name for name, _, _ in column_specs(ROOT_STATE_DDL)].index(
    "fail_reason"
) + 1


@dataclass(frozen=True)
class Suite:
    """The expectations of one batch. `index` names the columns that identify an
    unexpected row in the results (a root id, an event id). `cached`: the batch is
    cached for its expectations (each is a Spark job); a plain table read is not, since
    its column scans, skipped by Parquet statistics, cost less than caching every row."""

    name: str
    app: str | None
    index: tuple[str, ...]
    expectations: list[Expectation]
    cached: bool = True


def expect(cls_name: str, check: str, description: str, **kwargs: Any) -> Expectation:
    import great_expectations.expectations as gxe

    cls = getattr(gxe, cls_name)
    expectation: Expectation = cls(description=description, meta={"check": check}, **kwargs)
    return expectation


def _schema(table: str, ddl: str, columns: int | None = None) -> list[Expectation]:
    """The contract's columns exist (others may be added), with their types, and none of
    the NOT NULL ones holds a null."""
    specs = column_specs(ddl)[:columns]
    names = [name for name, _, _ in specs]
    found = [
        expect(
            "ExpectTableColumnsToMatchSet",
            "columns",
            f"{table} has the contract's columns: {', '.join(names)}",
            column_set=names,
            exact_match=False,
        )
    ]
    for name, kind, _ in specs:
        if kind in _SPARK_TYPES:
            found.append(
                expect(
                    "ExpectColumnValuesToBeOfType",
                    f"type.{name}",
                    f"{table}.{name} is {kind}",
                    column=name,
                    type_=_SPARK_TYPES[kind],
                )
            )
    for name, _, nullable in specs:
        if not nullable:
            found.append(
                expect(
                    "ExpectColumnValuesToNotBeNull",
                    f"not_null.{name}",
                    f"{table}.{name} is never null",
                    column=name,
                )
            )
    return found


def ledger_suites() -> list[Suite]:
    """Ledger soundness: the tables hold what the contract says, whatever wrote them."""
    events = [
        *_schema("ack_events", ACK_EVENTS_DDL),
        expect(
            "ExpectColumnValuesToBeInSet",
            "kind_in_domain",
            "every event's kind is init, ack or fail",
            column="kind",
            value_set=list(EVENT_KINDS),
        ),
        expect(
            "UnexpectedRowsExpectation",
            "event_id_unique",
            "event_id identifies one event: no two different events of a root share an id "
            "(the fold would drop one of them; exact duplicates, from a redelivery, are "
            "allowed)",
            # Grouped by the fold's key (root, 64-bit hash of the id), on numbers, not on
            # id strings (`says`: what the row says, as one hash); the few ids found are
            # joined back for their rows.
            unexpected_rows_query=(
                "SELECT /*+ BROADCAST(c) */ b.* FROM {batch} b JOIN ("
                "SELECT root_id, id_hash FROM (SELECT /*+ REPARTITION(root_id) */ root_id, "
                "xxhash64(event_id) AS id_hash, says FROM {batch}) GROUP BY root_id, id_hash "
                "HAVING count(*) > 1 AND min(says) <> max(says)"
                ") c ON b.root_id = c.root_id AND xxhash64(b.event_id) = c.id_hash"
            ),
        ),
    ]
    roots = [
        *_schema("roots", ROOTS_DDL, ROOTS_V1_COLUMNS),
        expect(
            "ExpectColumnValuesToBeUnique",
            "root_id_unique",
            "root_id identifies one root in roots: no two registrations of a root differ "
            "(exact duplicates, from a redelivery, are allowed)",
            column="root_id",
        ),
        expect(
            "ExpectColumnValuesToBeInSet",
            "origin_chain_valid",
            "every attempt's origin chain is valid: attempt 1 is its own origin, and "
            "attempt n follows a registered attempt n-1 of the same origin",
            column="origin_chain",
            value_set=[VALID_CHAIN],
        ),
        expect(
            "UnexpectedRowsExpectation",
            "attempts_within_max",
            "no root's attempt exceeds its app's max_attempts, unless a person replayed it by hand",
            unexpected_rows_query=(
                "SELECT root_id, app, attempt, max_attempts FROM {batch} "
                "WHERE attempt > max_attempts AND NOT sent_by_hand"
            ),
        ),
    ]
    states = [
        *_schema("root_state", ROOT_STATE_DDL, ROOT_STATE_CONTRACT),
        expect(
            "ExpectColumnValuesToBeUnique",
            "root_id_unique",
            "root_id is unique in root_state: one row per root",
            column="root_id",
        ),
        expect(
            "ExpectColumnValuesToBeInSet",
            "status_in_domain",
            "every status is one of " + ", ".join(status.ALL),
            column="status",
            value_set=list(status.ALL),
        ),
        expect(
            "UnexpectedRowsExpectation",
            "completed_xor_zero",
            "every completed root has an XOR of 0 and its init seen",
            unexpected_rows_query=(
                "SELECT root_id, app, status, xor_acc, init_seen FROM {batch} "
                "WHERE status IN ('completed', 'completed_late') "
                "AND (xor_acc <> 0 OR NOT init_seen)"
            ),
        ),
        expect(
            "UnexpectedRowsExpectation",
            "failed_has_reason",
            "every failed root has a reason",
            unexpected_rows_query=(
                "SELECT root_id, app, status, last_stage FROM {batch} "
                "WHERE status = 'failed' "
                "AND (fail_reason IS NULL OR trim(fail_reason) = '')"
            ),
        ),
    ]
    return [
        Suite("ledger.ack_events", None, ("event_id", "root_id"), events, cached=False),
        Suite("ledger.roots", None, ("root_id",), roots),
        Suite("ledger.root_state", None, ("root_id",), states),
    ]


def delivery_suites(policy: AppPolicy, app: str, *, latency: bool = True) -> list[Suite]:
    """The delivery guarantees of `app` under its thresholds (`policy.quality`); without
    `latency` when the app completed no root in the window (no percentile to check)."""
    q = policy.quality
    after = (policy.timeout + q.grace).total_seconds()
    sla = (q.latency_p99 or policy.timeout).total_seconds()
    lost = expect(
        "ExpectColumnValuesToBeInSet",
        "no_lost_roots",
        f"{app}: no lost roots: every root registered over {after:g} s ago (timeout plus "
        "grace) is completed, replayed (its next attempt registered) or dead-lettered",
        column="outcome",
        value_set=list(SETTLED_OUTCOMES),
    )
    sent = expect(
        "ExpectColumnValuesToBeInSet",
        "sent_registered",
        f"{app}: every message its producer reports as sent is registered as a root",
        column="registered",
        value_set=[True],
    )
    rates = [
        expect(
            "ExpectColumnMaxToBeBetween",
            "duplicate_rate",
            f"{app}: at most {q.max_duplicate_rate:.2%} of messages are processed more than "
            "once (an attempt completed late)",
            column="duplicate_rate",
            max_value=q.max_duplicate_rate,
        ),
        expect(
            "ExpectColumnMaxToBeBetween",
            "dead_letter_rate",
            f"{app}: at most {q.max_dead_letter_rate:.2%} of messages end dead-lettered",
            column="dead_letter_rate",
            max_value=q.max_dead_letter_rate,
        ),
    ]
    if latency:
        rates.append(
            expect(
                "ExpectColumnMaxToBeBetween",
                "latency_p99",
                f"{app}: the complete latency's 99th percentile is at most {sla:g} s",
                column="latency_p99_s",
                max_value=sla,
            )
        )
    return [
        Suite(f"delivery.{app}.overdue_roots", app, ("root_id",), [lost]),
        Suite(f"delivery.{app}.sent_messages", app, ("source_message_id",), [sent]),
        Suite(f"delivery.{app}.rates", app, ("app",), rates),
    ]
