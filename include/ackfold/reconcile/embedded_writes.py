"""What one step of the embedded reconcile writes (`ackfold.reconcile.embedded`): the
roots whose state changed MERGEd into `root_state`, the new ones appended, both by
delta-rs under the lease's epoch; and the events of roots still unknown kept waiting in
`unmatched_events`. The step has left its result in DuckDB's temp table `rows` (one row
per root, with its `change`: `duck_fold.UPDATE`, `INSERT` or `PARK`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.reading.sql import sql_date, sql_str
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import ACK_EVENTS_COLUMNS, ROOT_STATE, UNMATCHED_EVENTS
from ackfold.reconcile import duck_fold
from ackfold.reconcile.state import COLUMNS

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

log = logging.getLogger("ackfold.reconcile")

# `commit(table, action, what)`: one fenced commit; `scan(table)`: a table as a relation.
Commit = Callable[[str, Callable[[Any, Any], Any], str], Any]
Scan = Callable[..., Any]

_EVENT_COLUMNS = ", ".join(ACK_EVENTS_COLUMNS)
# What unmatched_events holds after a step: the other apps' waiting events (a run of
# one app, `$app`), and every event of the roots the step parked, once.
PARK_SQL = (  # built from ackfold's own names only
    f"SELECT {_EVENT_COLUMNS} FROM others_input "  # noqa: S608
    f"WHERE $app IS NOT NULL AND app <> $app "
    f"UNION SELECT {_EVENT_COLUMNS} FROM events "
    f"SEMI JOIN (SELECT root_id FROM rows WHERE change = '{duck_fold.PARK}') p USING (root_id)"
)


class StepWrites:
    """The writes of the embedded reconcile's steps, into the run's `counts`."""

    def __init__(
        self,
        db: duckdb.DuckDBPyConnection,
        writer: LedgerWriter,
        *,
        app: str | None,
        counts: dict[str, int],
        commit: Commit,
        scan: Scan,
    ) -> None:
        self.db = db
        self.writer = writer
        self.app = app
        self.counts = counts
        self._commit = commit
        self.scan = scan

    def write(self) -> None:
        """Write what the step's `rows` say: the changed roots MERGEd into `root_state`, the
        new ones appended, the roots still unknown kept waiting; and count them."""
        db = self.db
        totals = {
            change: (int(roots), int(fresh or 0), int(copies or 0), int(read or 0))
            for change, roots, fresh, copies, read in db.execute(
                "SELECT change, count(*), sum(fresh), sum(read + waited), sum(read) "
                "FROM rows GROUP BY change"
            ).fetchall()
        }
        read = sum(t[3] for t in totals.values())
        copies = sum(t[2] for t in totals.values())
        folded = sum(totals[c][1] for c in (duck_fold.UPDATE, duck_fold.INSERT) if c in totals)
        parked = totals[duck_fold.PARK][2] if duck_fold.PARK in totals else 0
        self.counts["events_read"] += read
        self.counts["events_folded"] += folded
        self.counts["duplicates_dropped"] += copies - folded - parked

        def roots(change: str) -> int:
            return totals[change][0] if change in totals else 0

        log.info(
            "reconcile (app=%s): %d new events, %d waiting, %d folded, %d root(s) changed, "
            "%d new, %d waiting for their init",
            self.app or "*", read, copies - read, folded, roots(duck_fold.UPDATE),
            roots(duck_fold.INSERT), roots(duck_fold.PARK),
        )  # fmt: skip
        if duck_fold.UPDATE in totals or duck_fold.INSERT in totals:
            db.execute(f"CREATE OR REPLACE TEMP TABLE written AS {duck_fold.HASHES_SQL}")
            self._merge_updates()
            self._append_new()
        if duck_fold.PARK in totals or copies > read:
            self._park()

    def _merge_updates(self) -> None:
        updates = self._written(duck_fold.UPDATE, [*COLUMNS, "prior_date", "prior_status"])
        if updates.num_rows == 0:
            return
        pairs = self.db.execute(
            "SELECT DISTINCT prior_date, prior_status FROM written WHERE change = $change "
            "ORDER BY ALL",
            {"change": duck_fold.UPDATE},
        ).fetchall()
        days = ", ".join(sql_date(d) for d, _ in pairs)
        statuses = ", ".join(sql_str(status.checked(s)) for _, s in pairs)
        # Literal partition bounds first, so delta-rs reads only those partitions.
        predicate = (
            f"t.first_event_date IN ({days}) AND t.status IN ({statuses}) "
            "AND t.first_event_date = s.prior_date AND t.status = s.prior_status "
            "AND t.root_id = s.root_id"
        )
        metrics = self._commit(
            ROOT_STATE,
            lambda table, properties: (
                table.merge(
                    updates, predicate, source_alias="s", target_alias="t",
                    commit_properties=properties,
                )
                .when_matched_update({c: f"s.{c}" for c in COLUMNS})
                .execute()
            ),
            "MERGE into",
        )  # fmt: skip
        self.counts["roots_updated"] += int((metrics or {}).get("num_target_rows_updated", 0))

    def _append_new(self) -> None:
        inserts = self._written(duck_fold.INSERT, list(COLUMNS))
        if inserts.num_rows:
            # Fenced, and found on a retry if it landed: new roots go in once.
            self._commit(
                ROOT_STATE,
                lambda table, properties: self.writer.write(
                    ROOT_STATE, table, inserts, commit_properties=properties
                ),
                "append to",
            )
        self.counts["roots_updated"] += inserts.num_rows

    def _written(self, change: str, columns: Sequence[str]) -> pa.Table:
        names = ", ".join(columns)  # the state's own column names
        return self.db.sql(
            f"SELECT {names} FROM written WHERE change = $change",  # noqa: S608
            params={"change": change},
        ).to_arrow_table()

    def _park(self) -> None:
        """Keep the events of roots with no state and no init in unmatched_events, for
        the next run with new events; the other apps' waiting events stay as they are."""
        self.scan(UNMATCHED_EVENTS).create_view("others_input")
        rows = self.db.sql(PARK_SQL, params={"app": self.app}).to_arrow_table()
        # Every row replaced (the other apps' are in `rows`), in one commit.
        self.writer.replace_where(UNMATCHED_EVENTS, rows, "true")
