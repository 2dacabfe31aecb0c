"""A small ledger for the deletion-vector tests, and the two copies of it that Spark
leaves in `tests/unit/deletion_vectors/` (`python -m tests.deletion_vector_ledger` makes
them again; `tests/spark/test_deletion_vectors.py` makes them afresh and checks them):

- `with_vectors`: `ack_events` with `delta.enableDeletionVectors`, and a Spark DELETE of
  the events of one root (`VICTIM`), which Spark marks in a deletion vector beside the
  data files instead of rewriting them;
- `purged`: the same, after the way out the error names (turn the property off, then
  `REORG TABLE ... APPLY (PURGE)`): the files are rewritten without vectors, and the
  table still lists the `deletionVectors` feature.

Only delta-rs is needed to read them: the tests that use them start no JVM."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ackfold.ledger.tables import ACK_EVENTS
from ackfold.ledger.writer import LedgerWriter
from ackfold.track.tracker import Tracker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=10)
FIXTURES = Path(__file__).resolve().parent / "unit" / "deletion_vectors"
WITH_VECTORS = "with_vectors"
PURGED = "purged"


def rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Four roots of app `orders`, each a root and a child acked in two stages; and the
    root whose events the DELETE removes."""
    ticks = iter(T0 + timedelta(seconds=i) for i in range(1000))
    tracker = Tracker("orders", clock=ticks.__next__)
    for n in range(4):
        root = tracker.spout(f"m{n}")
        child = tracker.emit([root], stage="split")
        tracker.ack(root, stage="split")
        tracker.ack(child, stage="store")
    events = [dict(e) for e in tracker.drain()]
    roots = [dict(r) for r in tracker.drain_roots()]
    return roots, events, int(roots[-1]["root_id"])


def write_ledger(warehouse: Path, *, without: int | None = None) -> None:
    """The ledger of `rows()` at `warehouse`, by delta-rs (`without`: leave out the events
    of that root, as a reader must see them after the DELETE)."""
    roots, events, _ = rows()
    kept = [e for e in events if e["root_id"] != without]
    LedgerWriter(str(warehouse)).append(roots, kept)


def make(spark: SparkSession, out: Path) -> None:
    """`with_vectors` and `purged` under `out`, made anew."""
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
        for leftover in [*events.glob("_delta_log/*.crc"), *events.glob(".*.crc")]:
            leftover.unlink()  # checksums only: delta-rs does not read them


if __name__ == "__main__":
    import tempfile

    from ackfold.config import load_settings
    from ackfold.spark import get_spark
    from tests.conftest import JARS_DIR

    scratch = Path(tempfile.mkdtemp(prefix="ackfold-dv-fixture-"))  # this run's settings
    settings = load_settings(var_dir=scratch, jars_dir=JARS_DIR, spark={"master": "local[1]"})
    session = get_spark(settings, app_name="deletion-vector-fixtures")
    make(session, FIXTURES)
    session.stop()
