"""Compact ack events: one ``ack`` row per root, stage and micro-batch instead of one per tuple.

A stage that acks 20 words of a sentence in one micro-batch writes, in compact mode, one
row: the XOR of the 20 per-tuple ack vals, under an id that names the set of tuples it
stands for (``ids.compact_event_id``: how many, and the XOR of their ids). XOR is
associative, so the fold of compact rows equals the fold of the per-tuple rows they
replace; and since the id names the set, processing the same tuples again writes the same
id, which the fold drops. Fails stay one row per tuple, each with its reason.

The mode is a stage's choice (``StageTracker(..., acks=...)``, ``Tracker(..., acks=...)``):

- ``compact`` (the default of ``StageTracker``): sound for a stage whose processing of a
  tuple is a function of that tuple (the same children every time it runs), whatever the
  batch boundaries, re-runs, kills and redeliveries;
- ``per_tuple``: one row per tuple and root, as before; sound for any stage, and what a
  stage that may emit different children on a second processing must use.

``docs/decisions/compact-events.md`` gives the argument; ``compact_acks`` here is the
reference that ``ackfold.track.events`` computes in Spark.

Example:
    >>> from datetime import datetime, timezone
    >>> at = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> rows = compact_acks("wc", [Ack(9, "count", 11, 0b01, at), Ack(9, "count", 12, 0b10, at)])
    >>> [(r["root_id"], r["kind"], r["ack_val"], r["stage"]) for r in rows]
    [(9, 'ack', 3, 'count')]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from ackfold.ledger.schema import ids
from ackfold.ledger.schema.contract import ACK

COMPACT: Final = "compact"
PER_TUPLE: Final = "per_tuple"
ACK_MODES: Final = (COMPACT, PER_TUPLE)


def check_acks(mode: object) -> str:
    """``mode`` if it is an ack mode, else a ``ValueError`` that names the choices."""
    if mode not in ACK_MODES:
        raise ValueError(
            f"acks must be {COMPACT!r} (one event per root, stage and micro-batch) or "
            f"{PER_TUPLE!r} (one per tuple, for a stage that may emit other children when it "
            f"processes a tuple again), got {mode!r}"
        )
    return str(mode)


@dataclass(frozen=True)
class Ack:
    """One tuple's ack by one stage, in one root's tree: what a per-tuple row would say."""

    root_id: int
    stage: str
    tuple_id: int
    ack_val: int
    event_time: datetime


def compact_acks(app: str, acks: Iterable[Ack]) -> list[dict[str, Any]]:
    """The compact ``ack_events`` rows of one micro-batch's ``acks``: one per root and stage.

    A tuple acked twice in the batch (a copy of an input) counts once, with its first
    value, as ``StageTracker.ack`` counts copies. Each row's ``event_time`` is its latest
    ack's. Rows come in the order of each (root, stage)'s first ack.
    """
    groups: dict[tuple[int, str], dict[int, Ack]] = {}
    for ack in acks:
        groups.setdefault((ack.root_id, ack.stage), {}).setdefault(ack.tuple_id, ack)
    rows = []
    for (root, stage), members in groups.items():
        ack_val = 0
        for ack in members.values():
            ack_val ^= ack.ack_val
        signature = ids.tuple_set_signature(members)
        rows.append(
            {
                "event_id": ids.compact_event_id(app, root, stage, len(members), signature),
                "app": app,
                "root_id": root,
                "kind": ACK,
                "ack_val": ack_val,
                "stage": stage,
                "event_time": max(ack.event_time for ack in members.values()),
                "reason": None,
            }
        )
    return rows
