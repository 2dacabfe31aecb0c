"""The Spark tracking API for streaming apps: the ``Tracker``'s verbs over whole DataFrames.

A tracked DataFrame carries each record's identity in one struct column, ``_ackfold``
(``ackfold.track.columns``): what ``tuples.Tuple`` carries plus the ids of its anchors,
so a stage can compute the acks of its inputs from its outputs. The column survives a
Delta table, so a job that reads another job's output keeps tracking the same trees.

A stage, inside ``foreachBatch``, reads like Storm's collector:

- ``spout`` registers one root per source row: ``roots`` rows, ``init`` events, tuples;
- ``emit`` / ``explode`` / ``aggregate`` make children anchored to their inputs: one to
  one, one to many, many to one (a child of tuples of several roots); ``to`` names the
  stages a child goes to, and ``to=[]`` makes a sink's output, which no stage consumes:
  it carries no edges and keeps no tree open (Storm: a stream without subscribers);
- ``ack(inputs, children)`` writes the inputs' own edges XOR the edges of their children
  (invariant 2): one row per root for the whole call (compact, the default), or one per
  input and root (``acks="per_tuple"``, ``ackfold.track.compact``); ``fail(inputs,
  reason)`` fails them, one row per input and root;
- ``write_batch`` appends the outputs (with ``txnAppId``/``txnVersion``, so a re-run
  batch writes no output twice), then the roots, then all events of the batch in one
  commit (idempotent by their ids: a re-run's copies are read once).

The events are the ones ``Tracker`` writes for the same topology, row for row (ids are
derived, never drawn): ``ackfold.track.spout`` registers the roots,
``ackfold.track.events`` computes the events, ``ackfold.track.write`` appends a batch. See
``docs/decisions/spark-tracking-api.md``.

A stage's whole ``foreachBatch`` (``split``: lines -> words, a spout, an ``explode``,
its acks and fails, and ``write_batch``) is in ``docs/tracking/spark.md``, which the docs
tier runs; ``tests/spark/test_tracking.py`` runs the same shape end to end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ackfold.ledger.schema import schemes
from ackfold.ledger.schema.optional_columns import roots_scheme
from ackfold.ledger.schema.tables import ROOTS, Ledger
from ackfold.ledger.setup.upgrade import stored_columns
from ackfold.track.children import ChildVerbs
from ackfold.track.columns import (
    ColumnOrName,
    as_column,
    tracked,
)
from ackfold.track.compact import COMPACT, check_acks
from ackfold.track.events import ack_rows, fail_rows
from ackfold.track.one_pass import ITEMS, Gathered, explode_acked
from ackfold.track.registration import Registration
from ackfold.track.spout import Spout, first_tuples, register_roots
from ackfold.track.tuples import check_name
from ackfold.track.write import append_batch


class StageTracker(ChildVerbs):
    """One stage of a tracked app: Storm's OutputCollector over DataFrames.

    ``app`` and ``stage`` name the events; ``ledger`` (a ``Ledger`` or its root directory)
    is where ``write_batch`` appends them. ``writer_id`` overrides the ``txnAppId`` of its
    writes; the default, ``ackfold/<app>/<stage>/<streaming query id>``, is unique per
    checkpoint, so a query restarted on a fresh checkpoint (batch ids from 0 again) is not
    mistaken for a re-run of the old one.

    Under Spark Connect, where a batch cannot ask which streaming query runs it, the
    query is found by its name among the session's active queries: ``query``, by default
    ``<app>.<stage>`` (``query_name``), or the only one that is active. Name your queries
    so when a session runs several (``.queryName("wordcount.split")``).

    ``acks`` is how ``ack`` writes: ``"compact"`` (the default), one row per root for all
    the inputs of a call, which needs a stage that emits the same children whenever it
    processes a tuple again; ``"per_tuple"``, one row per input and root, for a stage that
    may not (it draws at random, reads a clock or a service that can answer otherwise).
    See ``docs/decisions/compact-events.md``.

    Example:
        >>> split = StageTracker("wordcount", "split", ledger="/tmp/warehouse")
        >>> split
        StageTracker('wordcount', 'split')
    """

    def __init__(
        self,
        app: str,
        stage: str,
        *,
        ledger: Ledger | str | None = None,
        writer_id: str | None = None,
        query: str | None = None,
        acks: str = COMPACT,
        id_scheme: int = schemes.DEFAULT,
    ) -> None:
        self.app = check_name("app", app)
        self.stage = check_name("stage", stage)
        self.ledger = Ledger(ledger) if isinstance(ledger, str) else ledger
        self.writer_id = writer_id
        self.query = query
        self.acks = check_acks(acks)
        self.id_scheme = schemes.check_scheme(id_scheme)
        # The scheme `ledger`'s roots table can record (`roots_scheme`), once known.
        self._roots_scheme: int | None = None
        # Output tables `write_batch` found in the current tuple layout: not checked again.
        self._current_outputs: set[str] = set()

    def __repr__(self) -> str:
        return f"StageTracker({self.app!r}, {self.stage!r})"

    # -- the spout ------------------------------------------------------------------------

    def spout(
        self,
        df: DataFrame,
        *,
        message_id: ColumnOrName,
        source: str | Column,
        source_queue: str | Column = "",
        attempt: ColumnOrName | int = 1,
        origin_root_id: ColumnOrName | None = None,
        payload: ColumnOrName | None = None,
        source_position: ColumnOrName | None = None,
        to: Sequence[str] | None = None,
    ) -> Spout:
        """Register one root per row of ``df`` (source messages) and return its first tuples.

        Root ids are ``ids.root_id(app, f"{source}:{source_queue}:{message_id}", attempt,
        origin_root_id)``, as ``Tracker.spout``. ``message_id``, ``attempt`` (or an int),
        ``origin_root_id``, ``payload`` and ``source_position`` are columns; ``source`` and
        ``source_queue`` are literal strings unless given as a ``Column``. A message seen
        twice in ``df`` is registered once. ``to`` names the stages the tuples go to.

        Example:
            >>> spout = StageTracker("orders", "spout")
            >>> batch = spark.createDataFrame([("m-1", "{}")], "id string, body string")
            >>> out = spout.spout(batch, message_id="id", source="sqs",
            ...                   source_queue="orders-in", payload="body")
            >>> out.tuples.columns, out.events.first().kind, out.roots.first().payload
            (['id', 'body', '_ackfold'], 'init', '{}')
        """
        return register_roots(
            self.app,
            self.stage,
            df,
            message_id=message_id,
            source=source,
            source_queue=source_queue,
            attempt=attempt,
            origin_root_id=origin_root_id,
            payload=payload,
            source_position=source_position,
            to=to,
            id_scheme=self.roots_scheme(df.sparkSession),
        )

    def roots_scheme(self, spark: SparkSession) -> int:
        """The id scheme of the roots this stage registers: ``id_scheme``, unless the
        ``roots`` table of ``ledger`` has no ``id_scheme`` column (contract v1, until
        ``ackfold upgrade``), which records only the text scheme: then that, with one
        warning. Looked up once: a table never loses the column, and text-scheme roots
        fit a table that gains it."""
        if self.ledger is None:
            return self.id_scheme
        if self._roots_scheme is None:
            columns = stored_columns(self.ledger, ROOTS, spark)
            path = self.ledger.path(ROOTS)
            self._roots_scheme = roots_scheme(path, columns, self.id_scheme)
        return self._roots_scheme

    def registered(self, roots: DataFrame, *, to: Sequence[str] | None = None) -> DataFrame:
        """The first tuples of roots this spout stage registered earlier, one per row of
        ``roots`` (rows of the ``roots`` table, e.g. a stream of it).

        For sources that register roots before an app reads them (SQS: ``ingest.Ingester``
        ran ``spout`` and wrote the init events). ``to`` must name the stages the spout
        registered the roots for: it rebuilds the same tuples, so their acks cancel the
        init events' edges.

        Example:
            >>> spout = StageTracker("orders", "spout")
            >>> out = spout.spout(spark.createDataFrame([("m-1",)], "id string"),
            ...                   message_id="id", source="sqs")
            >>> again = spout.registered(out.roots).select("_ackfold").first()
            >>> again == out.tuples.select("_ackfold").first()
            True
        """
        return first_tuples(self.stage, roots, to, where=f"{self!r}.registered")

    # -- acks and fails -------------------------------------------------------------------

    def ack(
        self,
        inputs: DataFrame,
        children: DataFrame | None = None,
        *,
        exploded: ColumnOrName | None = None,
        to: Sequence[str] | None = None,
    ) -> DataFrame:
        """The ``ack`` events of this stage's ``inputs``: one per root (compact), or one per
        input tuple and root (``acks="per_tuple"``). A copy of an input passed twice counts
        once.

        Each input's ack XORs its own edges (for this stage as consumer) with the edges of
        every child in ``children`` anchored to it (invariant 2): pass all the children this
        stage emitted from ``inputs``. Inputs without children are acked too; a sink passes
        none, or its outputs emitted ``to=[]``, which add no edges. A compact row XORs the
        acks of all the root's inputs in the call, under an id that names that set of inputs.

        For children made by ``explode(inputs, items, name, to=...)``, pass ``exploded=items``
        (and the same ``to``) instead of ``children``: their edges are then derived from each
        input's array, one hash per element, without reading or shuffling the children
        (Storm's bolt XORs what it emits as it emits it). Every element of the array must
        have become a child that is written: filter the array, not the exploded rows, or
        the roots wait for children that never come, time out and are replayed.

        Example:
            >>> from pyspark.sql import functions as F
            >>> spout = StageTracker("wc", "spout").spout(
            ...     spark.createDataFrame([("m-1", "a b")], "id string, text string"),
            ...     message_id="id", source="test")
            >>> split = StageTracker("wc", "split")
            >>> words = split.explode(spout.tuples, F.split("text", " "), "word")
            >>> acc = 0
            >>> for e in spout.events.union(split.ack(spout.tuples, words)).collect():
            ...     acc ^= e.ack_val
            >>> acc != 0  # the two words are still pending
            True

        The same acks from the sentence's array alone:

            >>> by_array = split.ack(spout.tuples, exploded=F.split("text", " "))
            >>> by_rows = split.ack(spout.tuples, words)
            >>> key = ["event_id", "ack_val"]
            >>> by_array.select(key).collect() == by_rows.select(key).collect()
            True
        """
        where = f"{self!r}.ack"
        inputs = tracked(inputs, where)
        if children is not None:
            if exploded is not None:
                raise ValueError(f"{where}: pass children or exploded, not both")
            children = tracked(children, where)
        elif to is not None and exploded is None:
            raise ValueError(f"{where}: to= goes with exploded= (the explode's to)")
        return ack_rows(
            self.app,
            self.stage,
            inputs,
            children,
            compact=self.acks == COMPACT,
            exploded=None if exploded is None else as_column(exploded),
            to=to,
        )

    def fail(self, inputs: DataFrame, reason: str | Column) -> DataFrame:
        """The ``fail`` events of this stage's ``inputs``: every root of each fails.

        ``reason`` is a string or a column (per record); it must not be empty. Do not also
        ack these inputs; the edges of children emitted from them are dropped.

        Example:
            >>> spout = StageTracker("wc", "spout").spout(
            ...     spark.createDataFrame([("m-1", None)], "id string, text string"),
            ...     message_id="id", source="test")
            >>> fails = StageTracker("wc", "split").fail(spout.tuples, "no text")
            >>> fails.select("kind", "ack_val", "reason").first()
            Row(kind='fail', ack_val=0, reason='no text')
        """
        if isinstance(reason, str) and not reason.strip():
            raise ValueError(f"fail needs a non-empty reason, got {reason!r}")
        inputs = tracked(inputs, f"{self!r}.fail")
        return fail_rows(self.app, self.stage, inputs, reason)

    def explode_acked(
        self,
        df: DataFrame,
        items: ColumnOrName,
        name: str,
        *,
        fails: Sequence[tuple[Column, str | Column]] = (),
        to: Sequence[str] | None = None,
        position: str | None = None,
    ) -> tuple[DataFrame, Gathered]:
        """``explode`` with the acks and fails of ``df``'s rows, in one pass: the children
        and the events that writing them gathers (``ackfold.track.one_pass``).

        A row fails (``fail``) with the reason of the first ``fails`` pair (condition,
        reason) that holds for it, and has no children; every other row is exploded
        (``explode(df, items, name, to=to, position=position)``) and acked with its children
        (``ack(df, exploded=items, to=to)``). Pass the children to ``write_batch`` in
        ``outputs``, and the events in ``events``: the job that writes the children
        computes the events too, with no second pass over the batch. Read the children no
        other way before ``write_batch``. Rows to neither ack nor fail: filter them out of
        ``df`` first.

        Example:
            >>> import tempfile
            >>> warehouse = tempfile.mkdtemp()
            >>> rows = [("m-1", "a b"), ("m-2", None)]
            >>> lines = spark.createDataFrame(rows, "id string, text string")
            >>> spout = StageTracker("wc", "spout").spout(lines, message_id="id", source="test")
            >>> split = StageTracker("wc", "split", ledger=warehouse)
            >>> words, events = split.explode_acked(
            ...     spout.tuples, F.split("text", " "), "word",
            ...     fails=[(F.col("text").isNull(), "no text")])
            >>> split.write_batch(0, outputs={f"{warehouse}/words": words}, events=[events])
            >>> ledger = spark.read.format("delta").load(f"{warehouse}/ack_events")
            >>> sorted(ledger.select("kind", "reason").collect())
            [Row(kind='ack', reason=None), Row(kind='fail', reason='no text')]
        """
        where = f"{self!r}.explode_acked"
        df = tracked(df, where)
        return explode_acked(
            self.app,
            self.stage,
            df,
            as_column(items),
            compact=self.acks == COMPACT,
            explode=lambda rows, array: self.explode(rows, array, name, to=to, position=position),
            ack=lambda rows: self.ack(rows, exploded=F.col(ITEMS), to=to),
            fail=self.fail,
            fails=fails,
            to=to,
        )

    # -- writing --------------------------------------------------------------------------

    def write_batch(
        self,
        batch_id: int | None,
        *,
        outputs: Mapping[str, DataFrame] | None = None,
        roots: DataFrame | Registration | None = None,
        events: Sequence[DataFrame | Gathered] = (),
    ) -> None:
        """Append a micro-batch's outputs, roots and events, so that a re-run changes nothing.

        Order: every output table (path -> DataFrame), then ``roots``, then all ``events``
        in ONE commit to ``ack_events``. Each output append carries ``txnAppId`` (the
        writer id) and ``txnVersion=batch_id``, so Delta skips an output this batch already
        wrote. The ledger's rows carry no transaction id: they are idempotent by their
        derived ids, so a re-run appends exact copies, which the fold, the quality checks
        and ``ackfold show`` count once. Acks go last because an ack claims its outputs
        are durable: a crash must never leave a sink's ack without its output. ``events``
        may hold what ``explode_acked`` gathers: its children's write (here, or in an
        earlier call for the same batch) computes them. ``roots`` may be the
        ``Registration`` of a spout's one pass (``KafkaSpout.register_one_pass``): its
        roots are committed after the outputs, and its init events with ``events``.

        In a classic session whose warehouse is a directory of this machine, the ledger's
        rows are collected to the driver and committed by delta-rs, in milliseconds
        (``ackfold.track.write``). ``batch_id=None`` writes outputs without transaction
        ids too, for writers outside ``foreachBatch``. The first write of the process to
        each output table declares it (``ackfold.ledger.commits.outputs``, its origin column
        ``origin_root_id``), so that ``ackfold show`` and ``ackfold retract`` find a
        root's rows there.

        Example:
            >>> import tempfile
            >>> warehouse = tempfile.mkdtemp()
            >>> sink = StageTracker("orders", "spout", ledger=warehouse)
            >>> out = sink.spout(spark.createDataFrame([("m-1",)], "id string"),
            ...                  message_id="id", source="sqs")
            >>> for _ in range(2):  # batch 7 runs again, as after a crash
            ...     sink.write_batch(7, events=[out.events])
            >>> events = spark.read.format("delta").load(f"{warehouse}/ack_events")
            >>> events.count(), events.select("event_id", "ack_val").distinct().count()
            (2, 1)
        """
        if self.ledger is None:
            raise ValueError(
                f"{self!r} has no ledger: pass ledger=<warehouse root> to StageTracker to write"
            )
        append_batch(
            self.ledger,
            batch_id,
            app=self.app,
            stage=self.stage,
            writer_id=self.writer_id,
            query=self.query,
            outputs=outputs,
            roots=roots,
            events=events,
            current=self._current_outputs,
        )
