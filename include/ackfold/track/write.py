"""Writing a micro-batch to the ledger: every output table, then ``roots``, then all the
batch's events in one commit to ``ack_events``.

An output append carries ``txnAppId`` (the writer id) and ``txnVersion`` (the batch id), so
Delta skips an output table this batch already reached: a re-run writes no output twice.
The ledger's own rows go without them. Their ids are derived from what they say, and a
re-run reads the same offsets, so a re-run batch appends exact copies of what its first
run wrote (if that run got so far), which the fold, the quality checks and ``ackfold
show`` count once. That spares every stage micro-batch Delta's transaction-id lookup, a
reconstruction of the table's state that cost 2-3 times the append itself. Acks go last
because an ack claims its outputs are durable. An output table keeps the tuple layout it
started with (``ackfold.track.layout.matching``), so an app upgraded in place appends on.

In a classic session whose warehouse is a directory of this machine, the ledger's rows
are collected to the driver (Arrow) and committed by delta-rs (``LedgerWriter``): a
stage's compact events are about one row per root, and delta-rs commits them in
milliseconds where a Spark append costs a job and, every tenth commit, a checkpoint.
On an object store every process commits them so, a Spark Connect server's Python
worker too (``docs/decisions/object-stores.md``). Elsewhere (Spark Connect on a local
warehouse, HDFS) Spark appends them.
(``docs/decisions/lean-commits.md``)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from ackfold.ledger.commits.driver_writers import driver_writer
from ackfold.ledger.commits.outputs import declare_once
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema import schemes
from ackfold.ledger.schema.encoding import SPARK_LEDGER_OPTIONS
from ackfold.ledger.schema.optional_columns import require_roots_fit
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.ledger.setup.create import create_tables
from ackfold.ledger.setup.upgrade import stored_columns
from ackfold.ledger.storage.conflicts import retry_conflicts
from ackfold.ledger.storage.protocol import refuse_spark_commit
from ackfold.spark import is_connect
from ackfold.spark.frames import arrow_frame
from ackfold.track import folding, one_pass
from ackfold.track.layout import SCHEME, TUPLE_COLUMN, has_scheme, is_current, matching
from ackfold.track.one_pass import Gathered, Observed
from ackfold.track.registration import Registration
from ackfold.track.tracker import EVENT_COLUMNS, ROOT_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa


def append_batch(
    ledger: Ledger,
    batch_id: int | None,
    *,
    app: str,
    stage: str,
    writer_id: str | None,
    query: str | None = None,
    outputs: Mapping[str, DataFrame] | None,
    roots: DataFrame | Registration | None,
    events: Sequence[DataFrame | Gathered],
    current: set[str] | None = None,
) -> None:
    """Append a micro-batch's outputs, roots and events, in that order, each idempotently
    (``StageTracker.write_batch`` documents the order), then declare the outputs, once per
    process and table (``ackfold.ledger.commits.outputs``). ``current`` holds the output tables
    found in the current tuple layout before: their schemas are not read again (a Delta
    snapshot each); this call adds those it finds. A ``Registration`` as ``roots`` commits
    its roots, and its init events with ``events``."""
    if batch_id is not None and (
        isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0
    ):
        raise ValueError(
            f"batch_id must be the foreachBatch batch id (an int >= 0), got {batch_id!r}"
        )
    current = set() if current is None else current
    registration = roots if isinstance(roots, Registration) else None
    observed: list[Observed] = [e for e in events if isinstance(e, Gathered)]
    observed += [registration] if registration is not None else []
    frames = [*(outputs or {}).values(), *([roots] if isinstance(roots, DataFrame) else [])]
    frames += [e for e in events if not isinstance(e, Gathered)]
    if not frames and not observed:
        return
    if outputs:
        for one in observed:
            one.before_write()
    spark = frames[0].sparkSession if frames else observed[0].spark
    writer = (
        _txn_app_id(spark, batch_id, app=app, stage=stage, writer_id=writer_id, query=query)
        if batch_id is not None and outputs
        else None
    )
    direct = _ledger_writer(spark, ledger)
    for path, frame in (outputs or {}).items():
        target = None if path in current else _output_schema(spark, path, frame)
        _append(matching(frame, target), path, writer, batch_id)
        if target is None or is_current(target):
            current.add(path)
    inits = []
    if registration is not None:
        registered, _ = registration.tables()
        if registered.num_rows:  # an empty batch commits nothing
            if _commit(spark, ledger, direct, ROOTS, registered, registration.writer):
                registration.on_commit(registered.num_rows)
            inits.append(registration.init_events())
    elif isinstance(roots, DataFrame):
        _commit(spark, ledger, direct, ROOTS, roots.select(*ROOT_COLUMNS))
    if events or inits:
        _commit_events(spark, ledger, direct, events, inits)
    if outputs:
        declare_once(ledger.root, app, outputs)


def _commit_events(
    spark: SparkSession,
    ledger: Ledger,
    direct: LedgerWriter | None,
    events: Sequence[DataFrame | Gathered],
    inits: Sequence[pa.Table] = (),
) -> None:
    """Commit a batch's events in one commit: the frames' rows (collected to the driver
    where it commits, else appended by Spark), the rows their outputs' writes gathered
    (``one_pass``), or, where a write gathered nothing (a skipped re-run), the same events
    computed from the inputs again, and ``inits`` (a ``Registration``'s, in
    ``folding.driver_frame``'s columns)."""
    frames: list[DataFrame] = []
    held: list[pa.Table] = list(inits)
    labels: dict[int, tuple[str, str]] = {}
    for event in events:
        if not isinstance(event, Gathered):
            frames.append(event)
            continue
        metrics = event.result()
        if metrics is None:
            frames.extend(event.fallback())
            continue
        fold_set = -1 - len(labels)  # apart from the frames' own sets (0, 1, ...)
        labels[fold_set] = (event.app, event.stage)
        held.append(
            one_pass.gathered_rows(
                event.app, event.stage, metrics, compact=event.compact, fold_set=fold_set
            )
        )
    rows: DataFrame | pa.Table
    if direct is not None or held:
        # The driver folds the compact acks (`folding`): no shuffle.
        rows = _driver_rows(frames, held, labels)
    else:
        rows = reduce(DataFrame.unionByName, [e.select(*EVENT_COLUMNS) for e in frames])
    _commit(spark, ledger, direct, ACK_EVENTS, rows)


def _driver_rows(
    frames: Sequence[DataFrame], held: Sequence[pa.Table], labels: dict[int, tuple[str, str]]
) -> pa.Table:
    """The events of ``frames`` (collected in one Spark job, if any) and ``held``, stamped
    with the driver's time and folded, in the contract's Arrow schema."""
    import pyarrow as pa

    from ackfold.ledger.commits.table_rows import conform
    from ackfold.ledger.schema.contract import arrow_schema

    tables = list(held)
    if frames:
        frame, frame_labels = folding.driver_frame(frames)
        labels = {**labels, **frame_labels}
        collected = frame.toArrow()
        tables.append(collected.select(held[0].column_names) if held else collected)
    if len(tables) > 1:
        # Nullable: the held acks' event ids are null until they are folded.
        schema = pa.schema([f.with_nullable(True) for f in tables[-1].schema])
        tables = [t.cast(schema) for t in tables]
    folded = folding.stamp_and_fold(pa.concat_tables(tables), labels=labels)
    return conform(folded, arrow_schema(ACK_EVENTS))


def append_rows(
    spark: SparkSession,
    ledger: Ledger,
    *,
    roots: pa.Table,
    events: pa.Table,
    writer: tuple[str, int] | None = None,
) -> bool:
    """Append ledger rows the driver already holds (Arrow tables in the contract's columns,
    as a `Tracker` drains them): `roots`, then `events`, one commit each, none for no rows.
    The driver's delta-rs writer commits them where there is one, else Spark appends them.

    They are idempotent by their ids, as `append_batch`'s are. `writer`, a Delta
    application transaction (`batch_writer(...)`, the batch id), makes each commit once
    besides: a re-run of the batch writes no copies. Returns whether `roots` were written:
    False for none, or when the driver's writer found this transaction's commit (a Spark
    append does not say whether it skipped one)."""
    direct = _ledger_writer(spark, ledger)
    written = False
    for name, rows in ((ROOTS, roots), (ACK_EVENTS, events)):
        if rows.num_rows:
            done = _commit(spark, ledger, direct, name, rows, writer)
            written = written or (name == ROOTS and done)
    return written


def batch_writer(
    spark: SparkSession, batch_id: int, *, app: str, stage: str, query: str | None = None
) -> tuple[str, int]:
    """The Delta application transaction of this micro-batch's writes by `stage`: its
    ``txnAppId`` (``ackfold/<app>/<stage>/<streaming query id>``, as `StageTracker`'s
    outputs) and ``txnVersion`` (the batch id)."""
    return _txn_app_id(spark, batch_id, app=app, stage=stage, writer_id=None, query=query), batch_id


def _ledger_writer(spark: SparkSession, ledger: Ledger) -> LedgerWriter | None:
    """The driver's delta-rs writer of `ledger` (None: Spark commits), the tables created."""
    direct = driver_writer(spark, ledger)
    create_tables(spark, ledger, (ACK_EVENTS, ROOTS), writer=direct)
    return direct


def _commit(
    spark: SparkSession,
    ledger: Ledger,
    direct: LedgerWriter | None,
    name: str,
    rows: DataFrame | pa.Table,
    writer: tuple[str, int] | None = None,
) -> bool:
    """Commit ledger rows (a DataFrame, or Arrow the driver holds) to table `name`: by the
    driver's delta-rs writer where there is one, else by a Spark append; with `writer`,
    an application transaction, once (False: it was committed before)."""
    import pyarrow as pa

    from ackfold.ledger.commits.table_rows import conform
    from ackfold.ledger.schema.contract import arrow_schema

    app_id, version = writer if writer is not None else (None, None)
    held = isinstance(rows, pa.Table)
    if direct is not None:
        table = rows if held else rows.toArrow()
        return direct.append_arrow(name, table, app_id=app_id, version=version)
    refuse_spark_commit(ledger.root, name)  # never reached on an object store
    frame = arrow_frame(spark, conform(rows, arrow_schema(name))) if held else rows
    if name == ROOTS:
        frame = _in_roots_layout(spark, ledger, frame)
    return _append(frame, ledger.path(name), app_id, version, SPARK_LEDGER_OPTIONS)


# The `roots` tables found with `id_scheme`: a table never loses a column.
_WITH_SCHEME: set[str] = set()


def _in_roots_layout(spark: SparkSession, ledger: Ledger, frame: DataFrame) -> DataFrame:
    """`roots` rows as the stored table takes them: without `id_scheme` where it lacks the
    column (contract v1; no append adds it), after `require_roots_fit` refused rows of a
    scheme it cannot record, before anything is written."""
    from pyspark.sql import functions as F

    path = ledger.path(ROOTS)
    if path in _WITH_SCHEME or "id_scheme" not in frame.columns:
        return frame
    columns = stored_columns(ledger, ROOTS, spark)
    if columns is None or "id_scheme" in columns:
        _WITH_SCHEME.add(path)
        return frame
    scheme = F.col("id_scheme")
    others = frame.where(scheme.isNotNull() & (scheme != schemes.TEXT)).select(scheme)
    require_roots_fit(path, columns, [row.id_scheme for row in others.limit(1).collect()])
    return frame.drop("id_scheme")


def _txn_app_id(
    spark: SparkSession,
    batch_id: int,
    *,
    app: str,
    stage: str,
    writer_id: str | None,
    query: str | None,
) -> str:
    """The ``txnAppId`` of this batch's writes: ``writer_id``, else
    ``ackfold/<app>/<stage>/<streaming query id>`` (see ``StageTracker``)."""
    base = f"ackfold/{app}/{stage}"
    if is_connect(spark):
        if writer_id is not None:
            return writer_id
        found = connect_query_id(spark, query or query_name(app, stage), app, stage)
        return f"{base}/{found}" if found else base
    context = spark.sparkContext
    # Set by Spark on the thread running a micro-batch, which calls foreachBatch.
    running = context.getLocalProperty("streaming.sql.batchId")
    if running is not None and running != str(batch_id):
        raise ValueError(
            f"write_batch got batch_id {batch_id} inside micro-batch {running}: pass the "
            "batch id that foreachBatch gave your function"
        )
    if writer_id is not None:
        return writer_id
    query = context.getLocalProperty("sql.streaming.queryId")
    return f"{base}/{query}" if query else base


def query_name(app: str, stage: str) -> str:
    """The name that tells a stage's streaming query apart under Spark Connect, when its
    session runs several: ``<app>.<stage>`` (``StageTracker(query=...)`` names another).

    Example:
        >>> query_name("wordcount", "split")
        'wordcount.split'
    """
    return f"{app}.{stage}"


def connect_query_id(spark: SparkSession, name: str, app: str, stage: str) -> str | None:
    """The id of the streaming query running this ``foreachBatch`` under Spark Connect;
    None outside any query (a classic session has no query id there either).

    A Connect session has no local properties, so the query is found among the session's
    active queries, which the batch's own query is one of: the one named ``name``, else
    the only one. Its id is kept in the query's checkpoint, as in a classic session, so a
    re-run batch has the same ``txnAppId`` and a query restarted on a fresh checkpoint a
    new one.
    """
    active = spark.streams.active
    if not active:
        return None
    named = [q for q in active if q.name == name]
    if len(named) == 1:
        return str(named[0].id)
    if len(active) == 1 and not named:
        return str(active[0].id)
    raise ValueError(
        f"StageTracker({app!r}, {stage!r}) writes under Spark Connect, where a batch cannot "
        f"tell which of the session's {len(active)} streaming queries it belongs to: name "
        f"the stage's query .queryName({name!r}), or pass StageTracker(writer_id=...) a "
        "name unique to its checkpoint"
    )


def _table_schema(spark: SparkSession, path: str) -> StructType | None:
    """The schema of the Delta table at ``path``; None where there is none yet."""
    if _surely_absent(spark, path):
        return None
    try:
        return spark.read.format("delta").load(path).schema
    except AnalysisException:
        return None


def _surely_absent(spark: SparkSession, path: str) -> bool:
    """Whether a classic session finds no Delta table at ``path``, asked of Delta's log
    without a query. A failed read is posted to Spark's query listeners, and with a one
    pass's observation pending, Spark's ObservationManager logs it as an ERROR with a long
    trace (harmless, and alarming). Under Connect there is no JVM here to ask."""
    if is_connect(spark):
        return False
    try:
        tables = spark._jvm.io.delta.tables.DeltaTable  # type: ignore[union-attr]
        return not tables.isDeltaTable(spark._jsparkSession, path)
    except Exception:  # an unreachable store: the read says why
        return False


def _output_schema(spark: SparkSession, path: str, frame: DataFrame) -> StructType | None:
    """The schema of output table ``path`` that ``frame`` is appended to, its ``_ackfold``
    given the ``scheme`` field first if it lacks it (a table an older ackfold made): a
    metadata commit, after which its older rows read a null scheme, the text one."""
    schema = _table_schema(spark, path)
    if (
        schema is None
        or TUPLE_COLUMN not in frame.columns
        or TUPLE_COLUMN not in schema.fieldNames()
        or has_scheme(schema[TUPLE_COLUMN].dataType)
    ):
        return schema
    statement = f"ALTER TABLE delta.`{path}` ADD COLUMNS ({TUPLE_COLUMN}.{SCHEME} INT)"
    retry_conflicts(lambda: spark.sql(statement), what=f"adding {SCHEME} to {path}")
    return _table_schema(spark, path)


def _append(
    frame: DataFrame,
    path: str,
    writer: str | None,
    batch_id: int | None,
    options: Mapping[str, str] | None = None,
) -> bool:
    # Delta skips the append if this writer already committed this batch id to the table.
    write = frame.write.format("delta").mode("append").options(**(options or {}))
    if writer is not None:
        write = write.option("txnAppId", writer).option("txnVersion", str(batch_id))
    # A retry after a conflict commits once: the lost try committed nothing.
    retry_conflicts(lambda: write.save(path), what=f"append to {path}")
    return True  # Spark does not say whether it skipped the append
