"""Why a root timed out: the reason a reconcile on Spark writes for the roots it timed out at
a stage whose outputs no stage has ever acked (`ackfold.ledger.reading.pending`).

After a run's writes, the roots that timed out in it (status `timed_out` since the run's
`now`, no fail event) are grouped by app; what each app's completed roots went through
(`pending.apps_stages`: two bounded delta-rs reads for all of those apps, after this
run's completions) says which of their last stages no stage has ever acked, and one MERGE
writes the reason into `fail_reason`. A later fold keeps it (`spark_fold.combine`), a fail
event replaces it. The embedded engine does the same with `AppStages.timeout_reason`.

Where this process cannot read the warehouse with delta-rs (a Spark Connect server's
warehouse out of its reach), the roots time out without a reason, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ackfold.ledger.commits import dml
from ackfold.ledger.commits.fence import spark_commit
from ackfold.ledger.errors import LedgerError
from ackfold.ledger.reading.pending import AppStages, apps_stages
from ackfold.ledger.reading.reader import LedgerReader
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ROOT_STATE, Ledger
from ackfold.reconcile.spark_reads import delta_frame

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

log = logging.getLogger("ackfold.reconcile")


def explain_timeouts(
    spark: SparkSession, ledger: Ledger, *, now: datetime, app: str | None = None
) -> int:
    """Write the reason of the roots this run (at `now`) timed out at a stage whose outputs
    no stage has ever acked; the number of roots given one."""
    from pyspark.sql import functions as F

    # From its data files, the timed-out partitions only (`ackfold.reconcile.spark_reads`).
    state = delta_frame(
        spark, ledger, ROOT_STATE, keep=lambda partition: partition["status"] == status.TIMED_OUT
    )
    timed = state.where(
        (F.col("status") == F.lit(status.TIMED_OUT))
        & (F.col("status_changed_at") == F.lit(now))
        & F.col("fail_at").isNull()
        & F.col("fail_reason").isNull()
    )
    if app is not None:
        timed = timed.where(F.col("app") == F.lit(app))
    stops = timed.select("app", "last_stage", "first_event_date").distinct().collect()
    if not stops:
        return 0
    histories = app_histories(ledger, sorted({row["app"] for row in stops}), now)
    flagged = [h for h in histories if any(h.never_acked(r["last_stage"]) for r in stops)]
    if not flagged:
        return 0
    source = timed.select(
        "root_id", "first_event_date", reason_column(flagged).alias("reason")
    ).where(F.col("reason").isNotNull())
    dates = sorted({row["first_event_date"] for row in stops})
    on = " AND ".join(
        (
            dml.in_list("t.first_event_date", dates),
            f"t.status = {dml.literal(status.TIMED_OUT)}",
            "t.first_event_date = s.first_event_date",
            "t.root_id = s.root_id",
            "t.fail_at IS NULL",
        )
    )
    path = ledger.path(ROOT_STATE)
    clauses = ["WHEN MATCHED THEN UPDATE SET fail_reason = s.reason"]
    metrics = spark_commit(
        ledger.root,
        path,
        lambda txn: dml.merge(path, source, on=on, clauses=clauses, txn=txn),
        what=f"MERGE into {path}",
    )
    explained = dml.metric(metrics, "num_affected_rows")
    log.info(
        "reconcile: %d timed-out root(s) waited on a stage whose outputs no stage acks: %s",
        explained,
        ", ".join(f"{h.app}: {sorted(_flagged(h, stops))}" for h in flagged),
    )
    return explained


def reason_column(histories: Sequence[AppStages]) -> Column:
    """`AppStages.timeout_reason(last_stage)` of each row's app, as a Spark column (null for
    other apps, and for a stage some completed root went through)."""
    from pyspark.sql import functions as F

    reason = F.lit(None).cast("string")
    stage = F.col("last_stage")
    for history in histories:
        unacked = ~stage.isin(*sorted(history.acked)) if history.acked else F.lit(True)
        reason = F.when(
            (F.col("app") == F.lit(history.app)) & stage.isNotNull() & unacked,
            F.format_string(history.template(), stage),
        ).otherwise(reason)
    return reason


def app_histories(ledger: Ledger, apps: Sequence[str], now: datetime) -> list[AppStages]:
    """What the recent completed roots of each of `apps` (as of `now`) went through (none
    when the ledger cannot be read, with a warning: the roots time out without a reason)."""
    try:
        return apps_stages(LedgerReader(ledger.root), apps, now=now)
    except LedgerError as exc:
        log.warning("reconcile: cannot tell why roots of %s timed out: %s", ", ".join(apps), exc)
        return []


def _flagged(history: AppStages, stops: Sequence[object]) -> set[str]:
    return {
        str(row["last_stage"])  # type: ignore[index]
        for row in stops
        if row["app"] == history.app and history.never_acked(row["last_stage"])  # type: ignore[index]
    }
