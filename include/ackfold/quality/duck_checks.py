"""The ledger soundness checks on the embedded engine: each suite's expectations computed in
DuckDB, in one pass over its batch, as Great Expectations results.

`ack_events` is the large batch (every event of the window): its column checks (nulls,
kinds) and `event_id_unique` are one aggregation, grouped by the fold's key (root, hash of
the id) so that the ids whose copies disagree are found in the same scan. The roots and
`root_state` batches are small temporary tables; their row checks are a query each.

The results have the shape GX gives for the same expectation on Spark (element and
unexpected counts, observed values, a sample of unexpected rows named by the suite's
index columns), so `ackfold.quality.validator` reads both alike, and Data Docs show them.
What Spark observes is the reference: `tests/spark/test_quality_conformance.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from ackfold.quality.duck_batches import Batch
from ackfold.quality.expectations import Suite

if TYPE_CHECKING:
    import duckdb
    from great_expectations.core.expectation_validation_result import (
        ExpectationValidationResult,
    )
    from great_expectations.expectations.expectation import Expectation

SAMPLE: Final = 5
# The check whose Spark query groups by the fold's key: here, the same grouping in DuckDB
# (its own 64-bit hash of the id, as Spark's query uses xxhash64), in the batch's pass.
EVENT_ID_UNIQUE: Final = "event_id_unique"


@dataclass
class _Pass:
    """The aggregates of one pass: `counts` (SQL over the batch's rows, summed), an
    optional grouping (`key`, and the groups that count as unexpected)."""

    counts: list[str] = field(default_factory=list)
    key: list[str] = field(default_factory=list)
    group_aggregates: list[str] = field(default_factory=list)
    bad_group: str = ""

    def add(self, condition: str) -> int:
        self.counts.append(condition)
        return len(self.counts) - 1

    def sql(self, view: str) -> str:
        """One query: the row count, each count, and the rows in unexpected groups."""
        if not self.key:
            columns = ["count(*)", *(f"count_if({c})" for c in self.counts)]
            return f"SELECT {', '.join(columns)} FROM {view}"  # noqa: S608
        inner = [
            *(f"{k} AS k{i}" for i, k in enumerate(self.key)),
            "count(*) AS n",
            *(f"count_if({c}) AS c{i}" for i, c in enumerate(self.counts)),
            *self.group_aggregates,
        ]
        outer = [
            "coalesce(sum(n), 0)",
            *(f"coalesce(sum(c{i}), 0)" for i in range(len(self.counts))),
            f"coalesce(sum(n) FILTER (WHERE {self.bad_group}), 0)",
        ]
        return (
            f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)} FROM {view} "  # noqa: S608
            f"GROUP BY {', '.join(self.key)}) AS g"
        )


def evaluate(
    db: duckdb.DuckDBPyConnection, suite: Suite, batch: Batch
) -> list[ExpectationValidationResult]:
    """Each expectation of `suite` on `batch`, as GX's result."""
    from great_expectations.core.expectation_validation_result import (
        ExpectationValidationResult,
    )

    one = _Pass()
    pending: list[tuple[Expectation, Any]] = []
    for expectation in suite.expectations:
        pending.append((expectation, _plan(one, expectation, batch)))
    row = _one(db, one.sql(batch.view)) if (one.counts or one.key) else None
    values = list(row) if row is not None else [0]
    total = int(values[0] or 0)
    results = []
    for expectation, plan in pending:
        try:
            success, result = plan(db, total, values, suite.index)
            exception: dict[str, Any] = {
                "raised_exception": False, "exception_message": None, "exception_traceback": None
            }  # fmt: skip
        except _Missing as missing:
            success, result = False, {}
            exception = {"raised_exception": True, "exception_message": str(missing),
                         "exception_traceback": None}  # fmt: skip
        results.append(
            ExpectationValidationResult(
                success=success,
                expectation_config=expectation.configuration,
                result=result,
                exception_info=exception,
            )
        )
    return results


class _Missing(Exception):
    """The expectation's column is not in the batch (GX reports an error)."""


def _plan(one: _Pass, expectation: Expectation, batch: Batch) -> Any:
    """What computes `expectation`'s result once the pass ran: a function of (db, rows,
    the pass's values, index columns) -> (success, GX result dict)."""
    kind = expectation.expectation_type
    kwargs: dict[str, Any] = dict(expectation.configuration.kwargs)
    column = str(kwargs.get("column") or "")
    view = batch.view
    if kind == "expect_table_columns_to_match_set":
        return lambda *_: _columns(batch, kwargs["column_set"])
    if kind != "unexpected_rows_expectation" and column not in batch.columns:
        return _missing(column, batch)
    if kind == "expect_column_values_to_be_of_type":
        observed = batch.columns[column]
        return lambda *_: (
            observed == kwargs["type_"],
            {"observed_value": observed},
        )
    if kind == "expect_column_values_to_not_be_null":
        condition = f"{_q(column)} IS NULL"
        return _counted(one, condition, view, column, nonnull=False)
    if kind == "expect_column_values_to_be_in_set":
        values = kwargs["value_set"]
        condition = f"{_q(column)} IS NOT NULL AND {_q(column)} NOT IN ({_literals(values)})"
        return _counted(one, condition, view, column)
    if kind == "expect_column_values_to_be_unique":
        return _unique(one, column, view)
    if kind == "unexpected_rows_expectation":
        if expectation.configuration.meta.get("check") == EVENT_ID_UNIQUE:
            return _event_id_unique(one, view)
        query = kwargs["unexpected_rows_query"].replace("{batch}", view)
        return lambda db, *_: _unexpected_rows(db, query, f"SELECT count(*) FROM ({query})")  # noqa: S608
    raise ValueError(f"the embedded engine cannot check {kind} ({expectation.description})")


def _missing(column: str, batch: Batch) -> Any:
    def plan(*_: Any) -> Any:
        raise _Missing(f'The column "{column}" in BatchData does not exist.')

    return plan


def _columns(batch: Batch, wanted: Sequence[str]) -> tuple[bool, dict[str, Any]]:
    observed = sorted(batch.columns)
    missing = [c for c in wanted if c not in batch.columns]
    mismatched: dict[str, Any] = {"unexpected": [c for c in observed if c not in wanted]}
    if missing:
        mismatched["missing"] = missing
    return not missing, {"observed_value": observed, "details": {"mismatched": mismatched}}


def _counted(one: _Pass, condition: str, view: str, column: str, *, nonnull: bool = True) -> Any:
    slot = one.add(condition)

    def plan(
        db: duckdb.DuckDBPyConnection, total: int, values: list[Any], index: Sequence[str]
    ) -> tuple[bool, dict[str, Any]]:
        unexpected = int(values[1 + slot] or 0)
        sample = _sample(db, view, condition, index, column) if unexpected else []
        result = _map_result(total, unexpected, sample, index)
        return unexpected == 0, result

    return plan


def _unique(one: _Pass, column: str, view: str) -> Any:
    """Rows whose value another row shares (nulls excepted), found by grouping on it: in
    the pass when it groups by the same column, else in a query of its own."""
    if not one.key:
        one.key = [_q(column)]
        one.bad_group = "k0 IS NOT NULL AND n > 1"

        def grouped(
            db: duckdb.DuckDBPyConnection, total: int, values: list[Any], index: Sequence[str]
        ) -> tuple[bool, dict[str, Any]]:
            unexpected = int(values[-1] or 0)
            return _unique_result(db, view, column, total, unexpected, index)

        return grouped

    def separate(
        db: duckdb.DuckDBPyConnection, total: int, values: list[Any], index: Sequence[str]
    ) -> tuple[bool, dict[str, Any]]:
        row = _one(
            db,
            f"SELECT coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM {view} "  # noqa: S608
            f"WHERE {_q(column)} IS NOT NULL GROUP BY {_q(column)} HAVING count(*) > 1)",
        )
        return _unique_result(db, view, column, total, int(row[0] if row else 0), index)

    return separate


def _unique_result(
    db: duckdb.DuckDBPyConnection,
    view: str,
    column: str,
    total: int,
    unexpected: int,
    index: Sequence[str],
) -> tuple[bool, dict[str, Any]]:
    condition = (
        f"{_q(column)} IN (SELECT {_q(column)} FROM {view} WHERE {_q(column)} IS NOT NULL "  # noqa: S608
        f"GROUP BY {_q(column)} HAVING count(*) > 1)"
    )
    sample = _sample(db, view, condition, index, column) if unexpected else []
    return unexpected == 0, _map_result(total, unexpected, sample, index)


def _event_id_unique(one: _Pass, view: str) -> Any:
    """Ids that name two different events of a root: rows grouped by (root, hash of the
    id) whose copies say different things (`says`, one hash of what a row says)."""
    one.key = ["root_id", "hash(event_id)"]
    one.group_aggregates = ["min(says) AS lo", "max(says) AS hi"]
    one.bad_group = "n > 1 AND lo <> hi"

    def plan(
        db: duckdb.DuckDBPyConnection, total: int, values: list[Any], index: Sequence[str]
    ) -> tuple[bool, dict[str, Any]]:
        unexpected = int(values[-1] or 0)
        rows: list[dict[str, Any]] = []
        if unexpected:
            query = (
                f"SELECT b.* EXCLUDE (says) FROM {view} b WHERE (b.root_id, hash(b.event_id)) "  # noqa: S608
                f"IN (SELECT (root_id, hash(event_id)) FROM {view} GROUP BY root_id, "
                "hash(event_id) HAVING count(*) > 1 AND min(says) <> max(says))"
            )
            rows = _rows(db, f"{query} LIMIT {SAMPLE}")
        return unexpected == 0, {"observed_value": unexpected, "details": {"unexpected_rows": rows}}

    return plan


def _unexpected_rows(
    db: duckdb.DuckDBPyConnection, query: str, count: str
) -> tuple[bool, dict[str, Any]]:
    row = _one(db, count)
    unexpected = int(row[0] if row else 0)
    rows = _rows(db, f"SELECT * FROM ({query}) LIMIT {SAMPLE}") if unexpected else []  # noqa: S608
    return unexpected == 0, {"observed_value": unexpected, "details": {"unexpected_rows": rows}}


def _map_result(
    total: int, unexpected: int, sample: list[dict[str, Any]], index: Sequence[str]
) -> dict[str, Any]:
    """A column map expectation's result, as GX's SUMMARY format gives it."""
    percent = 100.0 * unexpected / total if total else None
    return {
        "element_count": total,
        "unexpected_count": unexpected,
        "unexpected_percent": percent,
        "partial_unexpected_list": [row[next(reversed(row))] for row in sample],
        "unexpected_index_column_names": list(index),
        "missing_count": 0,
        "missing_percent": 0.0 if total else None,
        "unexpected_percent_total": percent,
        "unexpected_percent_nonmissing": percent,
        "partial_unexpected_index_list": sample,
    }


def _sample(
    db: duckdb.DuckDBPyConnection,
    view: str,
    condition: str,
    index: Sequence[str],
    column: str,
) -> list[dict[str, Any]]:
    """The first unexpected rows: their index columns, then the column checked."""
    names = [c for c in dict.fromkeys([*index, column])]
    select = ", ".join(_q(c) for c in names)
    return _rows(db, f"SELECT {select} FROM {view} WHERE {condition} LIMIT {SAMPLE}")  # noqa: S608


def _one(db: duckdb.DuckDBPyConnection, query: str) -> tuple[Any, ...] | None:
    """The first row of `query`, its result read to the end (DuckDB takes no other
    statement on a connection while a result is open)."""
    rows = db.execute(query).fetchall()
    return rows[0] if rows else None


def _rows(db: duckdb.DuckDBPyConnection, query: str) -> list[dict[str, Any]]:
    cursor = db.execute(query)
    names = [d[0] for d in cursor.description or ()]
    return [
        {name: _naive(value) for name, value in zip(names, row, strict=True)}
        for row in cursor.fetchall()
    ]


def _naive(value: Any) -> Any:
    """A time as Spark's rows give it: naive, in UTC (the session's time zone)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literals(values: Sequence[Any]) -> str:
    """SQL literals of an expectation's value set (strings from ackfold's own suites,
    quoted and escaped; never user input)."""
    out = []
    for value in values:
        if isinstance(value, bool) or value is None:
            out.append(str(value).upper() if value is not None else "NULL")
        elif isinstance(value, int | float):
            out.append(repr(value))
        else:
            out.append("'" + str(value).replace("'", "''") + "'")
    return ", ".join(out)
