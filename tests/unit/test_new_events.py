"""What a reconcile reads of the new events before it folds them
(`ackfold.reconcile.new_events`): the earliest event of a step's files, from the minimums
the log keeps, with no row read, so the Spark engine starts no job for it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from deltalake import DeltaTable

from ackfold.embedded.log import DataFile
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.schema.tables import ACK_EVENTS, Ledger
from ackfold.reconcile.new_events import new_events, oldest_in_log

T0 = datetime(2026, 12, 1, 23, 59, 59, 999_999, tzinfo=UTC)  # a microsecond before a day


def _event(n: int, at: datetime) -> dict[str, object]:
    return dict(
        event_id=f"e{n}", app="a", root_id=n, kind="init", ack_val=n, stage="spout",
        event_time=at, reason=None,
    )  # fmt: skip


def test_oldest_event_of_the_appended_files_from_the_log(tmp_path: Path) -> None:
    writer = LedgerWriter(str(tmp_path / "warehouse"))
    writer.create()
    ledger = Ledger(str(tmp_path / "warehouse"))
    writer.append(events=[_event(1, T0 + timedelta(hours=2)), _event(2, T0)])
    first = {f.uri for f in new_events(ledger, None)[0].files}
    writer.append(events=[_event(3, T0 + timedelta(days=3))])
    appends, _ = new_events(ledger, None)
    assert len(appends.files) == 2

    oldest = oldest_in_log(ledger, appends.files)

    # The log keeps milliseconds, rounded down: the same day as the exact minimum.
    assert oldest == T0.replace(microsecond=999_000)
    assert oldest is not None
    assert oldest.date() == T0.date()
    # Only the files asked about count: the later append's alone.
    later = [f for f in appends.files if f.uri not in first]
    assert oldest_in_log(ledger, later) == (T0 + timedelta(days=3)).replace(microsecond=999_000)


def test_no_oldest_event_where_the_log_cannot_tell(tmp_path: Path) -> None:
    writer = LedgerWriter(str(tmp_path / "warehouse"))
    writer.create()
    ledger = Ledger(str(tmp_path / "warehouse"))
    writer.append(events=[_event(1, T0)])
    appends, _ = new_events(ledger, None)
    table = DeltaTable(ledger.path(ACK_EVENTS))
    gone = DataFile(f"{table.table_uri.rstrip('/')}/part-gone.parquet", 1, table.version())

    assert oldest_in_log(ledger, []) is None
    # A file no longer in the table (compacted since): the engine reads the rows instead.
    assert oldest_in_log(ledger, [*appends.files, gone]) is None
