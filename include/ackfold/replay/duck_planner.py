"""Replay planning on the embedded engine: DuckDB over the tables as delta-rs reads them.

The same selection as `ackfold.replay.spark_planner`, in SQL: `root_state` pruned to the
statuses asked for (its `status` partitions), each app's backoff from a small table of the
configured policies, the order by `status_changed_at` then `root_id`; then the candidates'
`roots` and `replay_log` rows, joined to the candidates' ids. Every value a request holds
reaches DuckDB as a bound parameter or an Arrow table, never as SQL text. The decisions
are the shared ones of `ackfold.replay.planner.Planner`, so both engines plan alike
(tests/spark/test_replay_conformance.py).

Example:
    >>> planner = EmbeddedPlanner(settings, SourceQueues(settings), now=now)   # doctest: +SKIP
    >>> planner.plan(ReplayRequest(app="wordcount")).selected                   # doctest: +SKIP
    12
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import Settings
from ackfold.embedded import duck, tables
from ackfold.ledger.schema.contract import CLOCK_SKEW
from ackfold.ledger.schema.tables import DEAD_LETTERS, REPLAY_LOG, ROOT_STATE, ROOTS
from ackfold.replay.planner import LOG_COLUMNS, ROOT_COLUMNS, Planner
from ackfold.replay.queues import SourceQueues
from ackfold.replay.request import DEFAULT_STATUSES, ReplayRequest

if TYPE_CHECKING:
    import duckdb

# What a plan reads of `root_state` (`Planner._decide`).
STATE_COLUMNS: Final = ("root_id", "app", "status", "attempt", "origin_root_id", "last_stage",
                        "fail_reason", "fail_stage", "first_event_at", "status_changed_at",
                        "first_event_date")  # fmt: skip
TIMES: Final = ("first_event_at", "status_changed_at")
# The tables a replay reads and writes: made (empty) if a ledger lacks them.
REPLAY_TABLES: Final = (ROOT_STATE, ROOTS, REPLAY_LOG, DEAD_LETTERS)


class EmbeddedPlanner(Planner):
    """Plans over the ledger in this process, with no JVM (`engine.kind` embedded)."""

    def __init__(self, settings: Settings, queues: SourceQueues, *, now: datetime) -> None:
        super().__init__(settings, queues, now=now)
        self._db: duckdb.DuckDBPyConnection | None = None

    @property
    def db(self) -> duckdb.DuckDBPyConnection:
        if self._db is None:
            self._db = duck.connect(self.settings)
        return self._db

    def _select(self, request: ReplayRequest, limit: int | None) -> list[dict[str, Any]]:
        import pyarrow as pa

        from ackfold.ledger.commits.writer import LedgerWriter

        LedgerWriter(self.settings.table_root).create(REPLAY_TABLES)
        if request.automatic:
            statuses: tuple[str, ...] | None = DEFAULT_STATUSES
        else:
            statuses = None if request.root_ids else request.statuses
        state = tables.scan(
            self.db,
            self.ledger.path(ROOT_STATE),
            columns=STATE_COLUMNS,
            partitions=[("status", "in", list(statuses))] if statuses else None,
        )
        state.create_view("replay_state", replace=True)
        where: list[str] = []
        params: list[Any] = []
        joins = ""
        if statuses:
            where.append("s.status IN (SELECT unnest(?))")
            params.append(list(statuses))
        if request.automatic:
            self.db.register("replay_policies", self._policy_table())
            joins = "LEFT JOIN replay_policies p ON p.app = s.app"
            # Seconds since the status changed, as doubles (Spark's cast of a timestamp).
            waited = "? - epoch_us(s.status_changed_at) / 1e6"
            attempt = "coalesce(s.attempt, 1)"
            where.append(
                f"(({waited}) >= coalesce(p.backoff, ?) * pow(2.0, {attempt} - 1)"
                f" OR {attempt} >= coalesce(p.max_attempts, ?))"
            )
            params += [
                self.now.timestamp(),
                self.settings.defaults.replay_backoff.total_seconds(),
                self.settings.defaults.max_attempts,
            ]
        if request.app:
            where.append("s.app = ?")
            params.append(request.app)
        if request.root_ids:
            ids = pa.table({"root_id": pa.array(request.root_ids, pa.int64())})
            self.db.register("replay_ids", ids)
            where.append("s.root_id IN (SELECT root_id FROM replay_ids)")
        if request.since:
            where.append("s.status_changed_at >= ?")
            params.append(request.since)
        if request.until:
            where.append("s.status_changed_at < ?")
            params.append(request.until)
        sql = (
            f"CREATE OR REPLACE TEMP TABLE replay_chosen AS SELECT "  # noqa: S608
            f"{', '.join(f's.{c}' for c in STATE_COLUMNS)} FROM replay_state s {joins}"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + " ORDER BY s.status_changed_at, s.root_id"
            + (" LIMIT ?" if limit else "")
        )
        if limit:
            params.append(limit)
        self.db.execute(sql, params)
        # The decisions need no times: they stay in DuckDB, where the reads below use them
        # (times become Python objects slowly: a third of a 10,000-root plan).
        return self._rows(
            f"SELECT {', '.join(c for c in STATE_COLUMNS if c not in TIMES)} "  # noqa: S608
            "FROM replay_chosen ORDER BY status_changed_at, root_id",
            [],
        )

    def _roots_of(self, candidates: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        columns = [*ROOT_COLUMNS, "ingested_at"]
        roots = tables.scan(self.db, self.ledger.path(ROOTS), columns=columns)
        roots.create_view("replay_roots", replace=True)
        found = self._rows(
            f"SELECT {', '.join(ROOT_COLUMNS)} FROM replay_roots "  # noqa: S608
            "WHERE ingested_at >= (SELECT min(first_event_at) FROM replay_chosen) - to_seconds(?)"
            " AND root_id IN (SELECT root_id FROM replay_chosen)",
            [CLOCK_SKEW.total_seconds()],
        )
        return {row["root_id"]: row for row in found}

    def _log_rows(self, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        columns = [*LOG_COLUMNS, "dry_run"]
        log = tables.scan(self.db, self.ledger.path(REPLAY_LOG), columns=columns)
        log.create_view("replay_entries", replace=True)
        return self._rows(
            f"SELECT {', '.join(LOG_COLUMNS)} FROM replay_entries "  # noqa: S608
            "WHERE NOT dry_run AND planned_at >= (SELECT min(status_changed_at) FROM replay_chosen)"
            " AND root_id IN (SELECT root_id FROM replay_chosen)",
            [],
        )

    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """The rows of `sql` as dicts of Python values (times in UTC, as Arrow gives
        them), its values bound from `params`."""
        result = self.db.sql(sql, params=params).to_arrow_table()
        assert result is not None
        rows: list[dict[str, Any]] = result.to_pylist()
        return rows

    def _policy_table(self) -> Any:
        """Each configured app's backoff (seconds) and attempts, as a table to join."""
        import pyarrow as pa

        names = sorted(self.settings.apps)
        policies = [self.settings.app(name) for name in names]
        return pa.table(
            {
                "app": pa.array(names, pa.string()),
                "backoff": pa.array([p.replay_backoff.total_seconds() for p in policies]),
                "max_attempts": pa.array([p.max_attempts for p in policies], pa.int64()),
            }
        )

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
