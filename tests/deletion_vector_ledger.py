"""A small ledger for the deletion-vector tests, and the two copies of it that Spark
leaves in `tests/unit/deletion_vectors/` (`python -m tests.deletion_vector_ledger` makes
them again; `tests/spark/test_deletion_vectors.py` makes them afresh and checks them):

- `with_vectors`: `ack_events` with `delta.enableDeletionVectors`, and a Spark DELETE of
  the events of one root (`VICTIM`), which Spark marks in a deletion vector beside the
  data files instead of rewriting them;
- `purged`: the same, after the way out the error names (turn the property off, then
  `REORG TABLE ... APPLY (PURGE)`): the files are rewritten without vectors, and the
  table still lists the `deletionVectors` feature;
- `state_with_vectors`: the whole ledger reconciled, then a Spark DELETE of `VICTIM`'s
  row from `root_state` with deletion vectors on: what the CLI and the UI read.

Only delta-rs is needed to read them: the tests that use them start no JVM."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE
from ackfold.track.tracker import Tracker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=10)
# `state_with_vectors` spreads its roots over a month (a UI chart of whole days), and is
# reconciled after them.
SPREAD_NOW = T0 + timedelta(days=31)
FIXTURES = Path(__file__).resolve().parent / "unit" / "deletion_vectors"
WITH_VECTORS = "with_vectors"
PURGED = "purged"
STATE_WITH_VECTORS = "state_with_vectors"


def rows(spread: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Four roots of app `orders`, each a root and a child acked in two stages (three
    events, a second apart), and the root whose events the DELETE removes (the last).
    `spread`: the first root on T0's day, the second 15 days later, the last two 30 days
    later (in one file of `root_state`)."""

    def at(i: int) -> datetime:
        return T0 + timedelta(seconds=i, days=15 * min(i // 3, 2) if spread else 0)

    ticks = iter(at(i) for i in range(1000))
    tracker = Tracker("orders", clock=ticks.__next__)
    for n in range(4):
        root = tracker.spout(f"m{n}")
        child = tracker.emit([root], stage="split")
        tracker.ack(root, stage="split")
        tracker.ack(child, stage="store")
    events = [dict(e) for e in tracker.drain()]
    roots = [dict(r) for r in tracker.drain_roots()]
    return roots, events, int(roots[-1]["root_id"])


def write_ledger(warehouse: Path, *, without: int | None = None, spread: bool = False) -> None:
    """The ledger of `rows(spread)` at `warehouse`, by delta-rs (`without`: leave out the
    events of that root, as a reader must see them after the DELETE)."""
    roots, events, _ = rows(spread)
    kept = [e for e in events if e["root_id"] != without]
    LedgerWriter(str(warehouse)).append(roots, kept)


def make(spark: SparkSession, out: Path, scratch: Path) -> None:
    """`with_vectors`, `purged` and `state_with_vectors` under `out`, made anew
    (`scratch`: a directory for the reconcile's own state)."""
    from ackfold.runs.reconcile import run_reconcile

    _, _, victim = rows()
    for name in (WITH_VECTORS, PURGED):
        shutil.rmtree(out / name, ignore_errors=True)
        write_ledger(out / name)
        events = out / name / ACK_EVENTS
        spark.sql(
            f"ALTER TABLE delta.`{events}` SET TBLPROPERTIES "
            "('delta.enableDeletionVectors' = 'true')"
        )
        spark.sql(f"DELETE FROM delta.`{events}` WHERE root_id = {victim}")
        if name == PURGED:
            spark.sql(
                f"ALTER TABLE delta.`{events}` SET TBLPROPERTIES "
                "('delta.enableDeletionVectors' = 'false')"
            )
            spark.sql(f"REORG TABLE delta.`{events}` APPLY (PURGE)")
        _drop_checksums(events)
    shutil.rmtree(out / STATE_WITH_VECTORS, ignore_errors=True)
    write_ledger(out / STATE_WITH_VECTORS, spread=True)
    settings = load_settings(var_dir=scratch, warehouse=str(out / STATE_WITH_VECTORS))
    run_reconcile(settings, now=SPREAD_NOW, engine="embedded")
    state = out / STATE_WITH_VECTORS / ROOT_STATE
    spark.sql(
        f"ALTER TABLE delta.`{state}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(f"DELETE FROM delta.`{state}` WHERE root_id = {victim}")
    _drop_checksums(state)


def _drop_checksums(table: Path) -> None:
    """Spark's checksum files (of the log, of Hadoop's writes): delta-rs reads none."""
    for leftover in set(table.rglob("*.crc")):
        leftover.unlink()


if __name__ == "__main__":
    import tempfile

    from ackfold.spark import get_spark
    from tests.conftest import JARS_DIR

    scratch = Path(tempfile.mkdtemp(prefix="ackfold-dv-fixture-"))  # this run's settings
    settings = load_settings(var_dir=scratch, jars_dir=JARS_DIR, spark={"master": "local[1]"})
    session = get_spark(settings, app_name="deletion-vector-fixtures")
    make(session, FIXTURES, scratch)
    session.stop()
