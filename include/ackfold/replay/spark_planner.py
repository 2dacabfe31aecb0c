"""Replay planning on Spark: `root_state`, `roots` and `replay_log` read as DataFrames.

The engine for ledgers read through Spark (`engine.kind = spark`); the decisions are the
shared ones of `ackfold.replay.planner.Planner`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings
from ackfold.config.policy import AppPolicy
from ackfold.ledger.schema.contract import CLOCK_SKEW
from ackfold.ledger.schema.tables import REPLAY_LOG, ROOT_STATE, ROOTS
from ackfold.ledger.setup.create import create_tables
from ackfold.replay.planner import LOG_COLUMNS, ROOT_COLUMNS, Planner
from ackfold.replay.queues import SourceQueues
from ackfold.replay.request import DEFAULT_STATUSES, ReplayRequest
from ackfold.spark.frames import local_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class SparkPlanner(Planner):
    """Plans over the ledger as `spark` reads it."""

    def __init__(
        self, spark: SparkSession, settings: Settings, queues: SourceQueues, *, now: datetime
    ) -> None:
        super().__init__(settings, queues, now=now)
        self.spark = spark

    def _select(self, request: ReplayRequest, limit: int | None) -> list[dict[str, Any]]:
        from pyspark.sql import functions as F

        create_tables(self.spark, self.ledger)
        state = self._read(ROOT_STATE)
        if request.automatic:
            # Wherever they sit in time (roots a long reconciler outage left behind too):
            # `status` partitions root_state, so only these statuses' files are read.
            state = state.where(F.col("status").isin(*DEFAULT_STATUSES) & self._backoff_passed())
        elif not request.root_ids:
            state = state.where(F.col("status").isin(*request.statuses))
        if request.app:
            state = state.where(F.col("app") == F.lit(request.app))
        if request.root_ids:
            state = state.where(F.col("root_id").isin(*request.root_ids))
        if request.since:
            state = state.where(F.col("status_changed_at") >= F.lit(request.since))
        if request.until:
            state = state.where(F.col("status_changed_at") < F.lit(request.until))
        state = state.orderBy("status_changed_at", "root_id")
        if limit:
            state = state.limit(limit)
        candidates = [row.asDict() for row in state.drop("seen_event_hashes").collect()]
        # A broadcast join, not isin(): thousands of literals cost seconds to plan.
        self._chosen = F.broadcast(
            local_frame(self.spark, [(r["root_id"],) for r in candidates], "root_id BIGINT")
        )
        return candidates

    def _roots_of(self, candidates: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        from pyspark.sql import functions as F

        earliest = min(row["first_event_at"] for row in candidates) - CLOCK_SKEW
        roots = (
            self._read(ROOTS)
            .where(F.col("ingested_at") >= F.lit(earliest))
            .join(self._chosen, "root_id")
        )
        return {row["root_id"]: row.asDict() for row in roots.select(*ROOT_COLUMNS).collect()}

    def _log_rows(self, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from pyspark.sql import functions as F

        earliest = min(row["status_changed_at"] for row in candidates)
        entries = (
            self._read(REPLAY_LOG)
            .where(~F.col("dry_run") & (F.col("planned_at") >= F.lit(earliest)))
            .join(self._chosen, "root_id")
        )
        return [row.asDict() for row in entries.select(*LOG_COLUMNS).collect()]

    def _backoff_passed(self) -> Any:
        """Per app: attempt k waits replay_backoff * 2**(k-1) after its status changed. A
        root out of attempts does not wait: there is nothing to space out, it is dead."""
        from pyspark.sql import functions as F

        from ackfold.reconcile.spark_fold import policy_column

        def per_app(value: Callable[[AppPolicy], float]) -> Any:
            return policy_column(self.settings, F.col("app"), lambda p: F.lit(value(p)))

        base = per_app(lambda p: p.replay_backoff.total_seconds())
        attempt = F.coalesce(F.col("attempt"), F.lit(1))
        wait = base * F.pow(F.lit(2.0), attempt - 1)
        # As doubles, not unix_timestamp(): that drops the fraction of a second.
        waited = F.lit(self.now).cast("double") - F.col("status_changed_at").cast("double")
        return (waited >= wait) | (attempt >= per_app(lambda p: float(p.max_attempts)))

    def _read(self, table: str) -> DataFrame:
        return self.spark.read.format("delta").load(self.ledger.path(table))
