"""A replay run's bookkeeping committed by delta-rs, with no JVM (the embedded engine).

The same rows and the same MERGEs as `ackfold.replay.bookkeeping.SparkBookkeeper`:

- `replay_log` rows are blind appends through the ledger's writer
  (`ackfold.ledger.commits.writer.LedgerWriter`: its commit protocol), fenced like every commit
  of the run (`LedgerWriter.append_fenced`): a run that lost the lease appends no row;
- `root_state`: one MERGE that moves each sent root to `replayed` or `dead_lettered`,
  only from a replayable status, so a re-run (or a run that finishes an earlier one's
  bookkeeping) changes nothing; `first_event_date` in the join prunes the partitions it
  reads, and `status`, a partition column, moves the row to its new partition;
- `dead_letters`: one MERGE that inserts a dead letter once and marks a redrive.

Every value goes to delta-rs as a column of an Arrow source table: the predicates hold
only ackfold's own column names and status constants. The run holds the ledger's lease
(`ackfold.ledger.commits.lease.ledger_turn`) around all of it, so no reconcile MERGEs meanwhile,
and its MERGEs carry the lease's epoch (`ackfold.ledger.commits.fence`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from ackfold.ledger.commits import dml
from ackfold.ledger.commits.fence import commit
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.contract import arrow_schema
from ackfold.ledger.schema.tables import DEAD_LETTERS, REPLAY_LOG, ROOT_STATE, Ledger
from ackfold.replay.bookkeeping import Bookkeeper
from ackfold.replay.request import REPLAYABLE


class EmbeddedBookkeeper(Bookkeeper):
    """Commits a run's rows to the ledger under `ledger` through delta-rs."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__(ledger)
        self.writer = LedgerWriter(ledger.root)

    def _append_log(self, records: list[tuple[Any, ...]]) -> None:
        import pyarrow as pa

        schema = arrow_schema(REPLAY_LOG)
        columns = list(zip(*records, strict=True))
        rows = pa.Table.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
        )
        self.writer.append_fenced(REPLAY_LOG, rows)

    def _set_statuses(self, updates: list[tuple[int, str, date]], now: datetime) -> None:
        import pyarrow as pa

        root_ids, statuses, days = zip(*updates, strict=True)
        source = pa.table(
            {
                "root_id": pa.array(root_ids, pa.int64()),
                "status": pa.array(statuses, pa.string()),
                "first_event_date": pa.array(days, pa.date32()),
                "changed_at": pa.array([now] * len(updates), pa.timestamp("us", tz="UTC")),
            }
        )
        replayable = ", ".join(f"'{s}'" for s in REPLAYABLE)  # ackfold's own constants
        # Literal partition bounds first: delta-rs then reads only the replayable partitions
        # of those days, not every file of root_state (the update touches no other row).
        on = " AND ".join(
            (
                dml.in_list("t.first_event_date", sorted(set(days))),
                f"t.status IN ({replayable})",
                "t.first_event_date = s.first_event_date AND t.root_id = s.root_id",
            )
        )

        def merge(table: Any, properties: Any) -> Any:
            return (
                table.merge(
                    source,
                    on,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=properties,
                )
                .when_matched_update(
                    {"status": "s.status", "status_changed_at": "s.changed_at"},
                    # A dead letter settled twice keeps its time: nothing changed.
                    predicate=f"t.status IN ({replayable}) AND t.status <> s.status",
                )
                .execute()
            )

        self._merge(ROOT_STATE, merge)

    def _record_letters(self, letters: list[tuple[Any, ...]], now: datetime) -> None:
        import pyarrow as pa

        schema = arrow_schema(DEAD_LETTERS)
        schema = schema.append(pa.field("redrive", pa.bool_())).append(
            pa.field("new_root_id", pa.int64())
        )
        columns = list(zip(*letters, strict=True))
        source = pa.Table.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
        )
        inserted = {name: f"s.{name}" for name in arrow_schema(DEAD_LETTERS).names}

        def merge(table: Any, properties: Any) -> Any:
            return (
                table.merge(
                    source,
                    "t.root_id = s.root_id",
                    source_alias="s",
                    target_alias="t",
                    commit_properties=properties,
                )
                # A redrive's `dead_lettered_at` column holds the run's time: when it was
                # redriven.
                .when_matched_update(
                    {"redriven_at": "s.dead_lettered_at", "redrive_root_id": "s.new_root_id"},
                    predicate="s.redrive AND t.redriven_at IS NULL",
                )
                .when_not_matched_insert(inserted, predicate="NOT s.redrive")
                .execute()
            )

        self._merge(DEAD_LETTERS, merge)

    def _merge(self, name: str, merge: Callable[[Any, Any], Any]) -> None:
        """Run `merge(table, commit_properties)` on the current version of table `name`,
        carrying the lease's epoch (`ackfold.ledger.commits.fence.commit`); a commit that loses to
        another writer reads again and decides again."""
        path = self.ledger.path(name)
        commit(self.ledger.root, path, merge, what=f"MERGE into {path}")
