"""What a replay run records in the ledger, and when: the `replay_log` rows of each send
(`planned` before it is tried, then `sent` or `failed`), then, once per run, the new
statuses in `root_state` and the dead letters and redrives in `dead_letters`.

A re-run plans from these rows: it sends exactly what was not yet marked sent
(invariant 4), and finishes the statuses of what was.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Final

from ackfold.ledger.commits import dml
from ackfold.ledger.commits.driver_writers import driver_writer
from ackfold.ledger.commits.fence import spark_commit
from ackfold.ledger.schema import status
from ackfold.ledger.schema.contract import arrow_schema
from ackfold.ledger.schema.tables import DEAD_LETTERS, REPLAY_LOG, ROOT_STATE, Ledger
from ackfold.replay.planner import DEAD_LETTER, REPLAY, SENT, Plan, Planned
from ackfold.replay.request import REPLAYABLE
from ackfold.sources.base import Sent
from ackfold.spark.frames import arrow_frame, arrow_table, local_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The events of the replay log, one row each: a send is `planned` before it is tried, and
# `sent` (`SENT`, with the new message id) or `failed` (with the error) after.
PLANNED: Final = "planned"
# `requested_by` of every automatic replay in `replay_log`.
AUTOMATIC: Final = "auto"
FAILED_SEND: Final = "failed"


def now_wall() -> datetime:
    """Log times are wall-clock times (a run's `now` may be set for timeouts)."""
    # Timezone-aware: Spark reads a naive datetime in the driver's local time zone.
    return datetime.now(UTC)


class Bookkeeper(ABC):
    """Writes a replay run's rows to the ledger under `ledger`: the rows are built here,
    an engine commits them (`SparkBookkeeper`; `EmbeddedBookkeeper` in
    `ackfold.replay.embedded_books`)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def append_log(
        self,
        plan: Plan,
        rows: Sequence[Planned],
        event: str,
        *,
        dry_run: bool = False,
        results: dict[int, Sent] | None = None,
    ) -> datetime:
        """Append one `event` row per send (a blind append: it never conflicts with a
        concurrent run). Returns the rows' time, which is `planned_at` for new plans."""
        now = now_wall()
        if not rows:
            return now
        request = plan.request
        who = AUTOMATIC if request.automatic else request.requested_by
        described = request.describe()
        records = []
        for p in rows:
            sent = results.get(p.root_id) if results else None
            records.append(
                (plan.replay_id, event, who, described, p.root_id, p.app, p.action,
                 p.prior_status, p.attempt, p.origin_root_id, p.new_root_id, p.source,
                 p.target, p.reason, p.last_stage, p.first_event_date, dry_run,
                 p.planned_at or plan.logged_at or now, now if event == SENT else None,
                 sent.message_id if sent else None, sent.error if sent else None)
            )  # fmt: skip
        self._append_log(records)
        return now

    def mark(self, plan: Plan, batch: Sequence[Planned], results: dict[int, Sent]) -> None:
        """After a chunk: a `sent` row for each delivered message, a `failed` row (with
        the error) for each that is still unsent."""
        self.append_log(plan, [p for p in batch if results[p.root_id].ok], SENT, results=results)
        failed = [p for p in batch if not results[p.root_id].ok]
        self.append_log(plan, failed, FAILED_SEND, results=results)

    def settle(self, done: Sequence[Planned], results: dict[int, Sent]) -> None:
        """After a send: root_state to replayed/dead_lettered (only from a replayable
        status: a re-run changes nothing); dead letters recorded, redrives noted."""
        if not done:
            return
        now = now_wall()
        updates = [
            (p.root_id, status.REPLAYED if p.action == REPLAY else status.DEAD_LETTERED,
             p.first_event_date)
            for p in done
        ]  # fmt: skip
        self._set_statuses(updates, now)
        letters = [
            (p.root_id, p.app, p.origin_root_id, p.attempt - 1, p.source, p.source_queue,
             p.target, p.reason or p.prior_status, p.last_stage,
             results[p.root_id].message_id if p.root_id in results else None,
             now, None, None, p.action == REPLAY, p.new_root_id)
            for p in done
            if p.action == DEAD_LETTER or p.prior_status == status.DEAD_LETTERED
        ]  # fmt: skip
        if letters:
            self._record_letters(letters, now)

    @abstractmethod
    def _append_log(self, records: list[tuple[Any, ...]]) -> None:
        """Append `records` (tuples in `replay_log`'s columns) in one commit."""

    @abstractmethod
    def _set_statuses(self, updates: list[tuple[int, str, date]], now: datetime) -> None:
        """Set each (root_id, status, first_event_date) root's status, changed at `now`,
        where its status is still one of `REPLAYABLE` and not that one already (a
        dead letter settled again keeps its time): one MERGE."""

    @abstractmethod
    def _record_letters(self, letters: list[tuple[Any, ...]], now: datetime) -> None:
        """MERGE `letters` (`dead_letters`' columns, then `redrive` and `new_root_id`):
        a dead letter is inserted once; a redrive marks its row `redriven_at` = `now`."""


class SparkBookkeeper(Bookkeeper):
    """Commits a run's rows through `spark` (the log by delta-rs where the driver can)."""

    def __init__(self, spark: SparkSession, ledger: Ledger) -> None:
        super().__init__(ledger)
        self.spark = spark

    def _append_log(self, records: list[tuple[Any, ...]]) -> None:
        rows = arrow_table(records, arrow_schema(REPLAY_LOG))
        direct = driver_writer(self.spark, self.ledger)
        if direct is not None:  # delta-rs, where the driver can: milliseconds, not a job
            direct.append_fenced(REPLAY_LOG, rows)
            return
        frame = arrow_frame(self.spark, rows)
        path = self.ledger.path(REPLAY_LOG)

        def append(txn: tuple[str, int] | None) -> None:
            dml.with_txn(frame.write.format("delta").mode("append"), txn).save(path)

        spark_commit(self.ledger.root, path, append, what=f"append to {path}")

    def _set_statuses(self, updates: list[tuple[int, str, date]], now: datetime) -> None:
        frame = local_frame(
            self.spark,
            [(root_id, new) for root_id, new, _ in updates],
            "root_id BIGINT, status STRING",
        )
        dates = sorted({day for _, _, day in updates})
        path = self.ledger.path(ROOT_STATE)
        spark_commit(
            self.ledger.root,
            path,
            lambda txn: dml.merge(
                path,
                frame,
                on=f"{dml.in_list('t.first_event_date', dates)} AND t.root_id = s.root_id",
                clauses=[
                    f"WHEN MATCHED AND {dml.in_list('t.status', REPLAYABLE)} "
                    "AND t.status <> s.status THEN UPDATE SET "
                    f"status = s.status, status_changed_at = {dml.literal(now)}"
                ],
                txn=txn,
            ),
            what=f"MERGE into {path}",
        )

    def _record_letters(self, letters: list[tuple[Any, ...]], now: datetime) -> None:
        import pyarrow as pa

        schema = (
            arrow_schema(DEAD_LETTERS)
            .append(pa.field("redrive", pa.bool_()))
            .append(pa.field("new_root_id", pa.int64()))
        )
        source = local_frame(self.spark, letters, schema)
        columns = [c for c in source.columns if c not in ("redrive", "new_root_id")]
        letters_path = self.ledger.path(DEAD_LETTERS)
        clauses = [
            "WHEN MATCHED AND s.redrive AND t.redriven_at IS NULL THEN UPDATE SET "
            f"redriven_at = {dml.literal(now)}, redrive_root_id = s.new_root_id",
            f"WHEN NOT MATCHED AND NOT s.redrive THEN INSERT ({', '.join(columns)}) "  # noqa: S608
            f"VALUES ({', '.join(f's.{c}' for c in columns)})",
        ]
        spark_commit(
            self.ledger.root,
            letters_path,
            lambda txn: dml.merge(
                letters_path, source, on="t.root_id = s.root_id", clauses=clauses, txn=txn
            ),
            what=f"MERGE into {letters_path}",
        )
