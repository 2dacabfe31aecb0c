"""What a user might run instead of ackfold's reconciler, on the same `ack_events` files.

- `duckdb_fold`: DuckDB, the single-node engine, doing the reconciler's de-duplication,
  XOR fold and classification in one SQL query. DuckDB cannot download its Delta
  extension here, so it reads the table's current files as delta-rs lists them.
- `spark_sql_fold`: the same SQL on Spark, over the same files: the engine's share of the
  gap, without ackfold's streaming read, state joins and MERGE.
- `StormAcker`: Storm's acker in Python, one in-memory map of per-root state updated
  event by event: the algorithm's own reference. Like Storm's, it trusts every event to
  arrive once (Storm's acker messages are not redelivered), so it does not de-duplicate.

Each returns the roots by status, so the benchmark can check that all engines agree.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from deltalake import DeltaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# One row per (root, event) first, then one per root: the reconciler's fold, as SQL that
# DuckDB and Spark both run unchanged. {source} and the {deadline} parameter's marker
# are filled per engine.
FOLD_SQL = """
WITH events AS (
    SELECT root_id, event_id,
           any_value(app) AS app, any_value(kind) AS kind, any_value(ack_val) AS ack_val,
           any_value(stage) AS stage, min(event_time) AS event_time,
           any_value(reason) AS reason
    FROM {source}
    GROUP BY root_id, event_id
),
folded AS (
    SELECT root_id, any_value(app) AS app, bit_xor(ack_val) AS xor_acc,
           bool_or(kind = 'init') AS init_seen, bool_or(kind = 'fail') AS failed,
           count(*) AS event_count, min(event_time) AS first_event_at,
           max(event_time) AS last_event_at, max_by(stage, event_time) AS last_stage,
           min_by(reason, event_time) FILTER (WHERE kind = 'fail') AS fail_reason
    FROM events
    GROUP BY root_id
)
SELECT *,
       CASE WHEN failed THEN 'failed'
            WHEN init_seen AND xor_acc = 0 THEN 'completed'
            WHEN first_event_at < {deadline} THEN 'timed_out'
            ELSE 'pending' END AS status
FROM folded
"""


def table_files(table: str) -> list[str]:
    """The parquet files of the Delta table's current version, as delta-rs lists them."""
    return [uri.removeprefix("file://") for uri in DeltaTable(table).file_uris()]


def duckdb_fold(files: list[str], deadline: datetime, out: Path) -> dict[str, int]:
    """Fold `files` with DuckDB into a parquet `root_state` at `out`; roots by status."""
    import duckdb

    sql = FOLD_SQL.format(source="read_parquet($files)", deadline="$deadline")
    with duckdb.connect() as db:
        db.sql(sql, params={"files": files, "deadline": deadline}).write_parquet(str(out))
        rows = db.execute(
            "SELECT status, count(*) FROM read_parquet($out) GROUP BY status", {"out": str(out)}
        ).fetchall()
    return {status: int(n) for status, n in rows}


def spark_sql_fold(
    spark: SparkSession, files: list[str], deadline: datetime, out: Path
) -> dict[str, int]:
    """The same fold with Spark SQL over the same files; roots by status."""
    spark.read.parquet(*files).createOrReplaceTempView("bench_events")
    # The deadline is data, not SQL text. Not a query parameter either: in a session with
    # Delta's extension, Spark 4.1 leaves `:name` and `?` markers unbound
    # (UNBOUND_SQL_PARAMETER), so it comes from a one-row view.
    spark.createDataFrame([(deadline,)], "deadline timestamp").createOrReplaceTempView(
        "bench_deadline"
    )
    sql = FOLD_SQL.format(source="bench_events", deadline="(SELECT deadline FROM bench_deadline)")
    spark.sql(sql).write.mode("overwrite").parquet(str(out))
    rows = spark.read.parquet(str(out)).groupBy("status").count().collect()
    return {row["status"]: int(row["count"]) for row in rows}


class StormAcker:
    """Storm's acker: a map of root id -> [ack val, first event time (µs), init, failed].

    Example:
        >>> acker = StormAcker()
        >>> acker.execute(7, "init", 5, 0)
        >>> acker.execute(7, "ack", 5, 10)
        >>> acker.statuses(deadline_us=100)
        {'completed': 1}
    """

    def __init__(self) -> None:
        self.pending: dict[int, list[int]] = {}

    def execute(self, root_id: int, kind: str, ack_val: int, at_us: int) -> None:
        entry = self.pending.get(root_id)
        if entry is None:
            entry = self.pending[root_id] = [0, at_us, 0, 0]
        entry[0] ^= ack_val
        if at_us < entry[1]:
            entry[1] = at_us
        if kind == "init":
            entry[2] = 1
        elif kind == "fail":
            entry[3] = 1

    def fold_files(self, files: list[str], batch_rows: int = 1 << 20) -> int:
        """Feed every event of `files` through `execute`, batch by batch; the events read."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        columns = ["root_id", "kind", "ack_val", "event_time"]
        read = 0
        execute = self.execute
        for batch in ds.dataset(files, format="parquet").to_batches(
            columns=columns, batch_size=batch_rows
        ):
            roots, kinds, vals, times = (batch.column(c) for c in columns)
            micros = times.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            for event in zip(
                roots.to_pylist(),
                kinds.to_pylist(),
                vals.to_pylist(),
                micros.to_pylist(),
                strict=True,
            ):
                execute(*event)
            read += batch.num_rows
        return read

    def statuses(self, deadline_us: int) -> dict[str, int]:
        """Roots by status, classified as the reconciler does at a timeout `deadline_us`."""
        counts: Counter[str] = Counter()
        for xor, first_us, init, failed in self.pending.values():
            if failed:
                counts["failed"] += 1
            elif init and xor == 0:
                counts["completed"] += 1
            elif first_us < deadline_us:
                counts["timed_out"] += 1
            else:
                counts["pending"] += 1
        return dict(counts)


if __name__ == "__main__":
    # `python bench/baselines.py TABLE DEADLINE OUT`: DuckDB's fold of the Delta table's
    # current files as a command of its own, timed as a whole as ackfold's command is.
    import json
    import sys

    table, deadline, out = sys.argv[1:4]
    statuses = duckdb_fold(table_files(table), datetime.fromisoformat(deadline), Path(out))
    print(json.dumps(statuses, sort_keys=True), flush=True)
