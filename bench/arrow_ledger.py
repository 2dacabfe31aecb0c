"""A synthetic ledger written without a JVM: numpy builds the trees, delta-rs commits them.

The same shape as `synth.Synthetic`, from the same `synth.Shape` (a complete `fanout`-ary tree of
`depth` levels per root, the spout's init first, one ack per tuple carrying its children's
edges; a fraction of roots fail at a leaf, a fraction lose one ack and time out), but the
tuple ids are drawn from a seeded generator instead of hashed, and the rows go straight to
`LedgerWriter.append_arrow` in slices of roots, so a 50M-event ledger is written in
bounded memory in about a minute, with no Spark.

Example:
    >>> ArrowLedger(roots=3).events_per_root
    8
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.contract import ACK, FAIL, INIT
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import EPOCH, Shape

SLICE_ROOTS = 500_000  # one commit per table per slice: about 4M events, ~0.5 GB of Arrow


@dataclass(frozen=True)
class ArrowLedger(Shape):
    """A `Shape` written by numpy and delta-rs: roots `first_root .. first_root + roots - 1`,
    one root started per millisecond."""

    def expected(self) -> dict[str, int]:
        """Roots by status once every root is past its timeout: what a reconcile must find."""
        fate = self._fates(0, self.roots)[1]
        failed = int(np.count_nonzero(fate < self.fail_rate))
        missing = int(np.count_nonzero(fate < self.fail_rate + self.missing_rate)) - failed
        return {"completed": self.roots - failed - missing, "failed": failed, "timed_out": missing}

    def write(self, writer: LedgerWriter) -> int:
        """Append every root, then its events, slice by slice; the number of events."""
        written = 0
        for first in range(0, self.roots, SLICE_ROOTS):
            count = min(SLICE_ROOTS, self.roots - first)
            roots, events = self.slice(first, count)
            writer.append_arrow(ROOTS, roots)
            writer.append_arrow(ACK_EVENTS, events)
            written += events.num_rows
        return written

    def _fates(self, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        ids = rng.integers(-(2**63), 2**63 - 1, size=self.roots, dtype=np.int64, endpoint=True)
        fate = rng.random(self.roots)
        return ids[first : first + count], fate[first : first + count]

    def slice(self, first: int, count: int) -> tuple[pa.Table, pa.Table]:
        """The `roots` and `ack_events` rows of roots `first .. first + count - 1`."""
        root_ids, fate = self._fates(first, count)
        root_ids = np.where(root_ids == 0, 1, root_ids)
        nodes, fanout = self.nodes, self.fanout
        rng = np.random.default_rng([self.seed, first])
        edges = rng.integers(-(2**63), 2**63 - 1, size=(count, nodes), dtype=np.int64)
        edges[edges == 0] = 1
        # Node j's ack: its own edge XOR its children's edges; the init carries node 0's.
        acks = edges.copy()
        for node in range(nodes):
            for child in range(node * fanout + 1, min(node * fanout + fanout, nodes - 1) + 1):
                acks[:, node] ^= edges[:, child]
        fails = fate < self.fail_rate
        missing = ~fails & (fate < self.fail_rate + self.missing_rate)
        leaf = nodes - 1
        ack_val = np.concatenate([edges[:, :1], acks], axis=1)  # column 0: the init
        ack_val[fails, leaf + 1] = 0
        kind = np.full((count, nodes + 1), ACK, dtype=object)
        kind[:, 0] = INIT
        kind[fails, leaf + 1] = FAIL
        stage_of = ["spout"]
        for level in range(self.depth + 1):
            stage_of += [f"stage-{level}"] * fanout**level
        keep = np.ones((count, nodes + 1), dtype=bool)
        keep[missing, leaf + 1] = False
        start_ms = (self.start - EPOCH) // timedelta(milliseconds=1) + first + self.first_root
        t0 = start_ms + np.arange(count, dtype=np.int64)  # ms since EPOCH
        times = (t0[:, None] * 1000 + 10_000 * np.arange(nodes + 1)[None, :]).astype(np.int64)
        epoch_us = int(EPOCH.timestamp() * 1_000_000)
        root_col = np.repeat(root_ids, nodes + 1).reshape(count, nodes + 1)
        node_col = np.tile(np.arange(nodes + 1, dtype=np.int64), (count, 1))
        flat: dict[str, Any] = {
            "root_id": root_col[keep],
            "node": node_col[keep],
            "kind": kind[keep],
            "ack_val": ack_val[keep],
            "time": times[keep] + epoch_us,
        }
        event_id = pc.binary_join_element_wise(
            pc.cast(pa.array(flat["root_id"]), pa.string()),
            pc.cast(pa.array(flat["node"]), pa.string()),
            "-",
        )
        stages = np.array(stage_of, dtype=object)[flat["node"]]
        events = pa.table(
            {
                "event_id": event_id,
                "app": pa.array(np.full(len(stages), self.app, dtype=object), pa.string()),
                "root_id": pa.array(flat["root_id"], pa.int64()),
                "kind": pa.array(flat["kind"], pa.string()),
                "ack_val": pa.array(flat["ack_val"], pa.int64()),
                "stage": pa.array(stages, pa.string()),
                "event_time": pa.array(flat["time"], pa.timestamp("us", tz="UTC")),
                "reason": pa.array(
                    np.where(flat["kind"] == FAIL, "synthetic failure", None), pa.string()
                ),
            }
        )
        roots = pa.table(
            {
                "root_id": pa.array(root_ids, pa.int64()),
                "app": pa.array([self.app] * count, pa.string()),
                "attempt": pa.array(np.ones(count, dtype=np.int32), pa.int32()),
                "origin_root_id": pa.array(root_ids, pa.int64()),
                "source": pa.array(["synthetic"] * count, pa.string()),
                "source_queue": pa.array(["bench"] * count, pa.string()),
                "source_message_id": pc.cast(pa.array(first + np.arange(count)), pa.string()),
                "source_position": pa.nulls(count, pa.string()),
                "payload": pa.nulls(count, pa.string()),
                "ingested_at": pa.array(t0 * 1000 + epoch_us, pa.timestamp("us", tz="UTC")),
            }
        )
        return roots, events
