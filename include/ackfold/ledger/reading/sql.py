"""Read-only SQL over the ledger's Delta tables, in delta-rs: no JVM, no Spark.

Queries run in delta-rs (`deltalake.QueryBuilder`, DataFusion SQL), so the CLI and the UI
answer in a fraction of a second without Spark, pyarrow or pandas. Each query names its
columns and filters that delta-rs pushes down: `first_event_date` prunes partitions, the
files' min/max statistics in the Delta log prune files, parquet statistics prune row
groups, and the filter columns are decoded before the others.

SQL is built only from ackfold's own names and from typed values quoted by `sql_str`,
`sql_ts`, `sql_date` or `int()`: user input never reaches it unquoted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from ackfold.ledger.errors import LedgerError, NoLedger
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.ledger.schema.values import iso

log = logging.getLogger("ackfold.ledger")

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Scan:
    """One query this reader ran, for tests and for judging cost (see `explain`)."""

    table: str
    sql: str
    rows: int


class SqlReader:
    """Read-only SQL over the ledger's tables under `warehouse` (`Settings.table_root`).

    Queries run in delta-rs' DataFusion (`deltalake.QueryBuilder`): partition values and
    file statistics from the Delta log prune files, parquet statistics prune row groups,
    and the filter is evaluated before the other columns are decoded. `scans` records
    every query, and `explain(scan)` shows what it read.
    """

    def __init__(self, warehouse: str) -> None:
        self.ledger = Ledger(warehouse)
        self.warehouse = warehouse.rstrip("/")
        self.scans: list[Scan] = []
        self._tables: dict[str, Any] = {}
        self._builder: Any = None

    def table(self, name: str, *, required: bool) -> Any:
        """The DeltaTable `name`, registered for SQL; None when it does not exist and is
        not `required`."""
        if self._tables.get(name) is not None or (name in self._tables and not required):
            return self._tables[name]
        from deltalake import QueryBuilder
        from deltalake.exceptions import DeltaError, TableNotFoundError

        from ackfold.ledger.storage.run_store import options_for
        from ackfold.ledger.storage.snapshots import run_table

        path = self.ledger.path(name)
        try:  # in a run, the run's kept snapshot of it, refreshed (`snapshots.run_table`)
            table: Any = run_table(path, options_for(path))
        except TableNotFoundError:
            if required:
                raise NoLedger(
                    f"no ledger at {self.warehouse} (no table {name}): "
                    + (
                        "create it with `ackfold init`, then let an app write events"
                        if name in (ACK_EVENTS, ROOTS)
                        else "run `ackfold reconcile` after an app has written events"
                    )
                ) from None
            table = None
        except (DeltaError, OSError) as exc:
            raise LedgerError(f"cannot read {path}: {unreadable(exc)}") from None
        if table is not None:
            if self._builder is None:
                self._builder = query_builder(QueryBuilder)
            with self.reading(name):
                self._builder.register(name, table)
        self._tables[name] = table
        return table

    @contextmanager
    def reading(self, name: str) -> Iterator[None]:
        """Turn the errors of a damaged or unreadable table into one `LedgerError` line."""
        from deltalake.exceptions import DeltaError

        try:
            yield
        except (DeltaError, OSError) as exc:
            raise LedgerError(f"cannot read {self.ledger.path(name)}: {unreadable(exc)}") from None

    def query(
        self,
        name: str,
        columns: Sequence[str],
        where: Sequence[str] = (),
        *,
        group: str | None = None,
        order: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        required: bool = False,
    ) -> list[dict[str, Any]]:
        """Rows of `SELECT columns FROM name WHERE where... GROUP BY group ORDER BY order
        LIMIT limit OFFSET offset`; no rows when the table does not exist and is not
        `required`."""
        if self.table(name, required=required) is None:
            return []
        sql = select(name, columns, where, group=group, order=order, limit=limit, offset=offset)
        with self.reading(name):
            result = self._builder.execute(sql).read_all()
        names = list(result.column_names)
        values = [result.column(i).to_pylist() for i in range(len(names))]
        rows = [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]
        self.scans.append(Scan(name, sql, len(rows)))
        return rows

    def arrow(self, name: str, sql: str) -> pa.Table:
        """The result of `sql` over the table `name` (which must exist), as a pyarrow
        Table: for results of many rows that are reduced in Arrow, not row by row in
        Python. `sql` is built as `query` builds its own (`select`)."""
        import pyarrow as pa

        self.table(name, required=True)
        with self.reading(name):
            result = pa.table(self._builder.execute(sql).read_all())
        self.scans.append(Scan(name, sql, result.num_rows))
        return result

    def explain(self, scan: Scan) -> str:
        """DataFusion's `EXPLAIN ANALYZE` of a query this reader ran: files and row groups
        it opened, pruned and scanned."""
        self.table(scan.table, required=True)
        with self.reading(scan.table):
            result = self._builder.execute(f"EXPLAIN ANALYZE {scan.sql}").read_all()
        return "\n".join(str(line) for line in result.column(1).to_pylist())


def select(
    name: str,
    columns: Sequence[str],
    where: Sequence[str] = (),
    *,
    group: str | None = None,
    order: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> str:
    """`SELECT columns FROM name WHERE where... GROUP BY group ORDER BY order LIMIT limit
    OFFSET offset`.

    Names are ackfold's constants; every value is quoted by `sql_str`, `sql_ts`,
    `sql_date` or `int()`: user input never reaches the SQL unquoted.

    Example:
        >>> select("root_state", ["status", "count(*) AS n"], ["app = 'a'"], group="status")
        "SELECT status, count(*) AS n FROM root_state WHERE (app = 'a') GROUP BY status"
    """
    sql = f"SELECT {', '.join(columns)} FROM {name}"  # noqa: S608
    if where:
        sql += " WHERE " + " AND ".join(f"({condition})" for condition in where)
    if group:
        sql += f" GROUP BY {group}"
    if order:
        sql += f" ORDER BY {order}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    if offset:
        sql += f" OFFSET {int(offset)}"
    return sql


def sql_str(text: str) -> str:
    """`text` as a SQL string literal (quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def sql_ts(moment: datetime) -> str:
    """`moment` as a SQL timestamp literal, in UTC to the microsecond."""
    return f"TIMESTAMP '{iso(moment, precise=True)}'"


def sql_date(day: date) -> str:
    """`day` as a SQL date literal."""
    return f"DATE '{day.isoformat()}'"


def app_since(app: str | None, since: datetime | None) -> list[str]:
    """The root_state conditions for the roots of `app` (every app if None) whose first
    event is at `since` or later, with the partition bound that lets a reader skip dates."""
    where = [] if app is None else [f"app = {sql_str(app)}"]
    if since is not None:
        where.append(f"first_event_at >= {sql_ts(since)}")
        where.append(f"first_event_date >= {sql_date(since.date())}")
    return where


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (its type when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def unreadable(exc: BaseException) -> str:
    """Why delta-rs cannot read a table: the first line of its error, and what to do
    where a deltalake before 1.6 meets a table that lists the deletionVectors feature
    (it opens none, with or without vectors)."""
    text = first_line(exc)
    if "DeletionVectors" not in text:
        return text
    from importlib.metadata import version

    return (
        f"{text}: deltalake {version('deltalake')} opens no table that lists the "
        "deletionVectors feature. Read it with deltalake 1.6 or later, or rewrite it "
        "without the feature (see the docs, Upgrading ackfold: Deletion vectors)"
    )


# Evaluate filters inside the parquet scan, before decoding other columns.
_SCAN_CONFIG: Final = {
    "datafusion.execution.parquet.pushdown_filters": "true",
    "datafusion.execution.parquet.reorder_filters": "true",
}


def query_builder(builder: Any) -> Any:
    """A delta-rs `QueryBuilder` that filters inside the parquet scan; a deltalake whose
    builder takes no configuration (before 1.6) scans, then filters: the same rows,
    more decoding."""
    try:
        return builder(_SCAN_CONFIG)
    except TypeError:
        _say_plain_scans()
        return builder()


@cache
def _say_plain_scans() -> None:
    from importlib.metadata import version

    log.info(
        "deltalake %s cannot push filters into its parquet scans (1.6 can): reads decode "
        "more; upgrade deltalake for faster CLI and UI reads",
        version("deltalake"),
    )
