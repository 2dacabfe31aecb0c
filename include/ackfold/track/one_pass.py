"""A stage's children, and the acks and fails of its inputs, in the one Spark job that
writes the children: ``StageTracker.explode_acked``.

``explode`` then ``ack(inputs, exploded=...)`` and ``fail`` read a micro-batch twice: once
to write the children, once more (a second Spark job, which tokenizes every input again)
for the events. Here the events ride on the write: the inputs pass through an
``Observation`` on their way to ``posexplode``, and the observation gathers, in the same
scan, one entry per input and root (its tuple id and its ack val: its own edges XOR its
children's, as ``ack(exploded=)`` computes them) and one per failed input (its tuple, its
roots, its reason). Spark hands the observation to the driver when the write's job ends;
``gathered_rows`` makes them event rows there, which ``write_batch`` folds per root
(``ackfold.track.folding``, compact) or keeps one per input (per tuple), stamps and commits.

The guarantee holds as in two passes. The ack vals are the same functions of each input,
so every edge enters the XOR exactly twice (the children's, once here and once in their
consumer's ack); copies of an input are read once by the fold (same tuple, same root);
and a re-run batch writes the same ids. A re-run whose output Delta skips (its
``txnVersion`` was committed) runs no job, so nothing is observed: ``write_batch`` then
computes the events the two-pass way, from ``fallback``. So it does if any other action
ran on the children before their write, which would have observed only what that
action read. See ``docs/decisions/compact-events.md``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from ackfold.ledger.schema import ids
from ackfold.ledger.schema.contract import ACK, FAIL
from ackfold.spark import is_connect
from ackfold.track import folding, layout
from ackfold.track.columns import hidden, literal
from ackfold.track.events import checked_reason, exploded_ack_value
from ackfold.track.layout import TUPLE_COLUMN
from ackfold.track.reuse import reused

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("ackfold.track")

# Working columns: the items (tokenized once) and the fail's reason (null: acked).
ITEMS: Final = hidden("items")
REASON: Final = hidden("fail_reason")
# How long write_batch waits for Spark to deliver the ends of finished queries.
_DELIVERY_WAIT_MS: Final = 10_000


@dataclass
class Observed:
    """What an ``Observation`` on a stage's rows gathers while its outputs are written
    (``Gathered``, ``ackfold.track.registration.Registration``): the figures of the write,
    or None where they are not the write's."""

    app: str
    stage: str
    spark: SparkSession
    observation: Observation
    # Whether an action completed the observation before the outputs' write.
    early: bool = field(default=False, kw_only=True)

    def before_write(self) -> None:
        """Note whether something observed the rows before the outputs' write (then its
        figures are not the write's, and the caller computes them the two-pass way)."""
        if observed(self.observation) is None:
            _deliver_finished_queries(self.spark)
        self.early = observed(self.observation) is not None

    def result(self) -> dict[str, Any] | None:
        """The observation of the outputs' write; None if it ran no job (a skipped re-run)
        or something else observed the rows first."""
        if self.early:
            log.warning(
                "%s.%s: the rows observed for one pass were read before write_batch wrote "
                "their outputs; what the write would have gathered is computed again",
                self.app,
                self.stage,
            )
            return None
        return observed(self.observation)


@dataclass
class Gathered(Observed):
    """The events ``explode_acked`` gathers while its children are written: pass it in
    ``write_batch(events=[...])`` beside the children in ``outputs``."""

    compact: bool
    # The same events the two-pass way: for a write that ran no job (a skipped re-run).
    fallback: Callable[[], list[DataFrame]]


def observed(observation: Observation) -> dict[str, Any] | None:
    """The metrics of ``observation``, None while no action completed it (never waits)."""
    if is_connect_observation(observation):
        return observation.get or None  # {} until a response carried the metrics
    jo = getattr(observation, "_jo", None)
    if jo is None or not jo.future().isCompleted():
        return None
    return observation.get


def _deliver_finished_queries(spark: SparkSession) -> None:
    """Let classic Spark deliver the ends of the queries that already returned. A query
    completes its observations on the listener bus, after the action returned: under load,
    an action on the children before their write was not seen yet, and the write's events
    were the observation of a part of the batch. (Connect carries the metrics in the
    action's response.)"""
    if is_connect(spark):
        return
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(_DELIVERY_WAIT_MS)
    except Exception as exc:  # the bus still busy after the wait: said, then looked at as is
        log.warning("Spark's listener bus did not empty in %d ms: %s", _DELIVERY_WAIT_MS, exc)


def new_observation(spark: SparkSession) -> Observation:
    """An ``Observation`` of ``spark``'s kind: a Spark Connect one in a Connect session (a
    Connect server's Python worker among them)."""
    name = f"ackfold-{uuid.uuid4().hex}"
    if is_connect(spark):
        from pyspark.sql.connect.observation import Observation as ConnectObservation

        return cast(Observation, ConnectObservation(name))
    return Observation(name)


def is_connect_observation(observation: Observation) -> bool:
    return type(observation).__module__.startswith("pyspark.sql.connect")


def explode_acked(
    app: str,
    stage: str,
    df: DataFrame,
    items: Column,
    *,
    compact: bool,
    explode: Callable[[DataFrame, Column], DataFrame],
    ack: Callable[[DataFrame], DataFrame],
    fail: Callable[[DataFrame, Column], DataFrame],
    fails: Sequence[tuple[Column, str | Column]],
    to: Sequence[str] | None,
) -> tuple[DataFrame, Gathered]:
    """The children of ``df``'s rows that no ``fails`` condition holds for (``explode``
    of ``items``), observed so that their write gathers the acks of those rows and the
    fails of the others; and the ``Gathered`` events. ``ack`` and ``fail`` make the same
    events the two-pass way, for ``Gathered.fallback``."""
    t = F.col(TUPLE_COLUMN)
    reason = F.lit(None).cast("string")
    for condition, why in reversed(fails):
        if isinstance(why, str) and not why.strip():
            raise ValueError(f"fail needs a non-empty reason, got {why!r}")
        reason = F.when(F.coalesce(condition, F.lit(False)), literal(why)).otherwise(reason)
    flagged = df.select("*", items.alias(ITEMS), reason.alias(REASON))
    r = F.col(REASON)
    roots, ack_vals, failed = _gathered(stage, None if to is None else tuple(to))
    observation = new_observation(df.sparkSession)
    watched = flagged.observe(
        observation,
        # collect_list leaves out nulls: the acked rows in the first lists, the failed in the
        # last (rare: one list of structs).
        F.collect_list(F.when(r.isNull(), t["id"])).alias("ack_tuples"),
        F.collect_list(F.when(r.isNull(), roots)).alias("ack_roots"),
        F.collect_list(F.when(r.isNull(), ack_vals)).alias("ack_vals"),
        F.collect_list(F.when(r.isNotNull(), failed)).alias("fails"),
    )
    children = explode(watched.where(r.isNull()), F.col(ITEMS)).drop(ITEMS, REASON)

    def fallback() -> list[DataFrame]:
        again = flagged.where(r.isNull()).drop(REASON)
        events = [ack(again)]
        if fails:
            events.append(fail(flagged.where(r.isNotNull()).drop(ITEMS), r))
        return events

    return children, Gathered(app, stage, df.sparkSession, observation, compact, fallback)


@reused
def _gathered(stage: str, to: tuple[str, ...] | None) -> tuple[Column, Column, Column]:
    """What the observation gathers of each input: its roots, its ack val per root (as
    ``ack(exploded=)`` computes it), and a failed input's tuple id, roots and reason. The
    acks go as lists of numbers, not one list of structs: the driver unpickles numbers
    several times faster than Rows, and never null for an acked row, the lists line up."""
    t, r = F.col(TUPLE_COLUMN), F.col(REASON)
    roots = layout.roots_of(t)
    ack_vals = F.transform(roots, lambda root: exploded_ack_value(stage, t, root, F.col(ITEMS), to))
    failed = F.struct(
        t["id"].alias("tuple_id"), roots.alias("roots"), checked_reason(stage, t, r).alias("reason")
    )
    return roots, ack_vals, failed


def gathered_rows(
    app: str, stage: str, metrics: dict[str, Any], *, compact: bool, fold_set: int
) -> pa.Table:
    """The event rows of ``metrics`` (``Gathered.result``) in ``folding.driver_frame``'s
    columns: acks per input and root (in fold set ``fold_set`` if ``compact``, else with
    their per-tuple event ids), fails per input and root; ``event_time`` left to the
    driver (``folding.stamp_and_fold`` stamps and folds them).

    Example:
        >>> metrics = {"ack_tuples": [11], "ack_roots": [[9]], "ack_vals": [[5]],
        ...            "fails": [{"tuple_id": 12, "roots": [9], "reason": "bad"}]}
        >>> rows = gathered_rows("wc", "split", metrics, compact=True, fold_set=-1)
        >>> [(r["kind"], r["ack_val"], r["fold_set"]) for r in rows.to_pylist()]
        [('ack', 5, -1), ('fail', 0, None)]
    """
    import pyarrow as pa

    roots: list[int] = []
    tuples: list[int | None] = []
    vals: list[int] = []
    event_ids: list[str | None] = []
    kinds: list[str] = []
    reasons: list[str | None] = []
    sets: list[int | None] = []
    acked = zip(metrics["ack_tuples"], metrics["ack_roots"], metrics["ack_vals"], strict=True)
    for tuple_id, its_roots, its_vals in acked:
        for root, val in zip(its_roots, its_vals, strict=True):
            roots.append(root)
            tuples.append(tuple_id if compact else None)
            vals.append(val)
            event_ids.append(None if compact else ids.event_id(app, root, ACK, stage, tuple_id))
            kinds.append(ACK)
            reasons.append(None)
            sets.append(fold_set if compact else None)
    for entry in metrics["fails"]:
        for root in entry["roots"]:
            roots.append(root)
            tuples.append(None)
            vals.append(0)
            event_ids.append(ids.event_id(app, root, FAIL, stage, entry["tuple_id"]))
            kinds.append(FAIL)
            reasons.append(entry["reason"])
            sets.append(None)
    n = len(roots)
    return pa.table(
        {
            "event_id": pa.array(event_ids, pa.string()),
            "app": pa.array([app] * n, pa.string()),
            "root_id": pa.array(roots, pa.int64()),
            "kind": pa.array(kinds, pa.string()),
            "ack_val": pa.array(vals, pa.int64()),
            "stage": pa.array([stage] * n, pa.string()),
            "event_time": pa.nulls(n, pa.timestamp("us", tz="UTC")),
            "reason": pa.array(reasons, pa.string()),
            folding.STAMPED: pa.array([True] * n, pa.bool_()),
            folding.TUPLE_ID: pa.array(tuples, pa.int64()),
            folding.FOLD_SET: pa.array(sets, pa.int32()),
        }
    )
