"""A spout's registrations gathered by the job that writes its query's outputs: a query
that reads its source, processes and writes in one micro-batch registers its roots with
no Spark job of its own (``KafkaSpout.register_one_pass``).

``register`` brings each record's ``roots`` row and ``init`` event to the driver in a job
of their own and commits them before the stage runs. Here the registration rows pass
through an ``Observation`` under the stage's work, as ``explode_acked``'s acks do
(``ackfold.track.one_pass``): the job that writes the outputs gathers them, and
``write_batch(roots=registration)`` commits them after the outputs, before it returns.
Offsets advance only once ``foreachBatch`` returns, so a batch that dies before the
commit runs again from the same offsets: its outputs are skipped (their transaction is
done), the write runs no job, nothing is observed, and the rows are computed the two-pass
way (``fallback``), the same ids. A record the stage filters out is registered all the
same: the observation sits under every filter of the stage (Spark pushes no filter through
it), so a record the stage drops times out and is replayed.

The driver adds what is the same for every row (app, source, id scheme) and stamps the
time, once per batch: the Spark job holds no per-batch literal, so its generated code is
compiled once. See ``docs/decisions/compact-events.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ackfold.track import folding
from ackfold.track.one_pass import Observed, new_observation
from ackfold.track.spout import INIT_COLUMNS, split_rows

if TYPE_CHECKING:
    import pyarrow as pa

# The `Spout.rows` columns that differ from row to row: the observation gathers these, one
# list each (the driver unpickles lists of values several times faster than Rows); the
# rest (app, source, id scheme, the time) the driver knows. Those that may be null go in
# one-element arrays: collect_list leaves nulls out, and the lists must line up.
PER_ROW: Final = (
    "root_id",
    "attempt",
    "origin_root_id",
    "source_queue",
    "source_message_id",
    *INIT_COLUMNS,
)
NULLABLE: Final = ("source_position",)
PAYLOAD: Final = "payload"


@dataclass
class Registration(Observed):
    """The ``roots`` rows and ``init`` events of a micro-batch's records, gathered while
    its outputs are written: pass it to ``write_batch(roots=...)`` in the call that writes
    the outputs (or a later one for the same batch)."""

    # What every row of the batch has alike: app, source, id scheme (as `Spout.rows`).
    constants: dict[str, Any]
    keep_payload: bool
    # The same rows the two-pass way (`Spout.rows` collected): for a write that ran no job.
    fallback: Callable[[], pa.Table]
    # The Delta application transaction of the roots' commit (`batch_writer`): a batch run
    # again after it registers no root twice.
    writer: tuple[str, int] | None = field(default=None, kw_only=True)
    # Called with the roots committed, once they are.
    on_commit: Callable[[int], None] = field(default=lambda _: None, kw_only=True)
    _tables: tuple[pa.Table, pa.Table] | None = field(default=None, init=False)

    def tables(self) -> tuple[pa.Table, pa.Table]:
        """The ``roots`` rows and the ``init`` events, one per root, in the contract's
        columns (``split_rows``'): from the outputs' write, else computed again."""
        if self._tables is None:
            metrics = self.result()
            lined_up = metrics is not None and len({len(v) for v in metrics.values()}) == 1
            rows = self._rows(metrics) if metrics is not None and lined_up else self.fallback()
            self._tables = split_rows(rows, app=self.app, stage=self.stage)
        return self._tables

    @property
    def replayed(self) -> int:
        """Roots of attempt 2 or more in the batch: where a sink that appends first
        attempts must merge (``docs/decisions/replay-safe-sinks.md``)."""
        roots, _ = self.tables()
        return sum(1 for attempt in roots.column("attempt").to_pylist() if attempt > 1)

    def _rows(self, columns: dict[str, list[Any]]) -> pa.Table:
        """``Spout.rows``' table from the gathered columns, the constants and the time."""
        import pyarrow as pa

        n = len(columns["root_id"])
        for name in (*NULLABLE, PAYLOAD):
            if name in columns:
                columns[name] = [one for (one,) in columns[name]]
        payload = columns[PAYLOAD] if self.keep_payload else [None] * n
        now = datetime.now(UTC)
        return pa.table(
            {
                "root_id": pa.array(columns["root_id"], pa.int64()),
                "app": pa.array([self.constants["app"]] * n, pa.string()),
                "attempt": pa.array(columns["attempt"], pa.int32()),
                "origin_root_id": pa.array(columns["origin_root_id"], pa.int64()),
                "source": pa.array([self.constants["source"]] * n, pa.string()),
                "source_queue": pa.array(columns["source_queue"], pa.string()),
                "source_message_id": pa.array(columns["source_message_id"], pa.string()),
                "source_position": pa.array(columns["source_position"], pa.string()),
                PAYLOAD: pa.array(payload, pa.string()),
                "ingested_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
                "id_scheme": pa.array([self.constants["id_scheme"]] * n, pa.int32()),
                INIT_COLUMNS[0]: pa.array(columns[INIT_COLUMNS[0]], pa.string()),
                INIT_COLUMNS[1]: pa.array(columns[INIT_COLUMNS[1]], pa.int64()),
            }
        )

    def init_events(self) -> pa.Table:
        """The ``init`` events in ``folding.driver_frame``'s columns, for the batch's one
        commit of events (already stamped: the roots' time)."""
        import pyarrow as pa

        _, events = self.tables()
        n = events.num_rows
        return (
            events.append_column(folding.STAMPED, pa.array([False] * n))
            .append_column(folding.TUPLE_ID, pa.nulls(n, pa.int64()))
            .append_column(folding.FOLD_SET, pa.nulls(n, pa.int32()))
        )


def observe_registration(
    rows: DataFrame,
    *,
    app: str,
    stage: str,
    source: str,
    id_scheme: int,
    keep_payload: bool,
) -> tuple[DataFrame, Registration]:
    """``rows`` (``Spout.rows`` of a batch's records, ``source`` a literal) observed, and
    the ``Registration`` their first write gathers. The payload is gathered only with
    ``keep_payload``; ``rows`` keep it for the stage."""
    spark = rows.sparkSession
    observation = new_observation(spark)
    nullable = [*NULLABLE, *((PAYLOAD,) if keep_payload else ())]
    watched = rows.observe(
        observation,
        *(F.collect_list(name).alias(name) for name in PER_ROW),
        *(F.collect_list(F.array(name)).alias(name) for name in nullable),
    )

    def fallback() -> pa.Table:
        kept = rows if keep_payload else rows.withColumn(PAYLOAD, F.lit(None).cast("string"))
        return kept.toArrow()

    constants = {"app": app, "source": source, "id_scheme": id_scheme}
    return watched, Registration(app, stage, spark, observation, constants, keep_payload, fallback)
