"""A run's reads take its kept snapshots (issue 55): within a run (`run_store.using`), the
embedded engine's scans and log read, the mark, the root_state layout check and the
run's `SqlReader`s read the thread's `DeltaTable` of each table, refreshed, instead of
opening it again; what they read is what a fresh open reads, row for row and version for
version, whatever another writer committed meanwhile, and a table made anew at its path
is read anew. Outside a run (the UI, a script) nothing is kept.

Opens are counted by wrapping `DeltaTable.__init__` (the real one runs), as in
`test_ledger_snapshots.py`."""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ackfold import Tracker
from ackfold.config import Settings, load_settings
from ackfold.embedded import tables
from ackfold.embedded.log import appended_since
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.reading.sql import SqlReader
from ackfold.ledger.schema.tables import LEASE
from ackfold.ledger.storage.run_store import Store, using
from ackfold.runs.reconcile import run_reconcile
from tests.conftest import JARS_DIR

T0 = datetime(2026, 11, 27, tzinfo=UTC)


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URIs of the `DeltaTable`s constructed, in order."""
    seen: list[str] = []
    real = DeltaTable.__init__

    def counted(self: DeltaTable, *args: Any, **kwargs: Any) -> None:
        seen.append(str(args[0] if args else kwargs["table_uri"]))
        real(self, *args, **kwargs)

    monkeypatch.setattr(DeltaTable, "__init__", counted)
    return seen


def _in_a_thread(run: Any) -> Any:
    """`run()` in a thread of its own: nothing kept from this one's earlier reads."""
    result: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(run())
        except BaseException as exc:  # raised again in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


def _reconciled(
    tmp_path: Path, acked: Callable[[int], bool]
) -> tuple[Settings, Tracker, LedgerWriter]:
    """A small ledger of three roots, one append each (a root `acked(n)` gets its ack),
    reconciled once: root_state exists before the run a test counts."""
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    writer = LedgerWriter(settings.table_root)
    tracker = Tracker("orders", clock=lambda: T0)
    for n in range(3):
        root = tracker.spout(f"m{n}")
        if acked(n):
            tracker.ack(root, stage="store")
        writer.append(tracker.drain_roots(), tracker.drain())
    run_reconcile(settings, now=T0 + timedelta(minutes=1), engine="embedded")
    return settings, tracker, writer


def test_an_embedded_reconcile_opens_each_table_at_most_once(
    tmp_path: Path, opens: list[str]
) -> None:
    """A reconcile of a small ledger with a root_state already, in a thread with no table
    kept: each ledger table is opened once at most (the lease, read afresh at its take and
    give-back by design, aside). Before, each scan, each read of the mark, the layout
    check and each `SqlReader` opened its table again: root_state 9 times a run."""
    settings, tracker, writer = _reconciled(tmp_path, acked=lambda n: n > 0)
    for n in range(3, 5):  # new events: the next run folds them, not a quiet one
        tracker.ack(tracker.spout(f"m{n}"), stage="store")
        writer.append(tracker.drain_roots(), tracker.drain())

    before = len(opens)
    summary = _in_a_thread(
        lambda: run_reconcile(settings, now=T0 + timedelta(hours=2), engine="embedded")
    )
    counted = Counter(uri.rstrip("/").rsplit("/", 1)[-1] for uri in opens[before:])
    counted.pop(LEASE, None)
    assert summary["events_read"] == 4  # two roots: a spout and an ack each
    assert summary["by_status"] == {"completed": 4, "timed_out": 1}
    assert counted, "the run read its tables"
    assert max(counted.values()) == 1, counted


def _rows(relation: Any) -> list[tuple[Any, ...]]:
    return sorted(relation.fetchall())


def _fresh(path: str) -> list[tuple[Any, ...]]:
    table = DeltaTable(path).to_pyarrow_table()
    return sorted(zip(*(table.column(c).to_pylist() for c in ("day", "n")), strict=True))


def test_a_runs_reads_are_what_a_fresh_open_reads(tmp_path: Path, opens: list[str]) -> None:
    """Within a run, after each commit of another writer (appends, a partition replaced,
    a delete, a merge, a column added, the table made anew at its path), the scan, the
    log read and a `SqlReader` read the same rows at the same version as a fresh open,
    from one kept table (one open, and one again for the table made anew)."""
    path = str(tmp_path / "t")
    first = pa.table({"day": ["a", "b"], "n": [1, 2]})
    write_deltalake(path, first, partition_by=["day"])

    def made_anew() -> None:
        shutil.rmtree(path)
        write_deltalake(path, pa.table({"day": ["z"], "n": [9]}), partition_by=["day"])

    changes: list[Callable[[], object]] = [
        lambda: write_deltalake(path, pa.table({"day": ["a"], "n": [3]}), mode="append"),
        lambda: write_deltalake(
            path, pa.table({"day": ["b"], "n": [20]}), mode="overwrite",
            predicate="day = 'b'",
        ),
        lambda: DeltaTable(path).delete("n = 1"),
        lambda: DeltaTable(path)
        .merge(pa.table({"day": ["a", "c"], "n": [3, 5]}), "t.n = s.n AND t.day = s.day",
               source_alias="s", target_alias="t")
        .when_matched_update({"n": "s.n + 100"})
        .when_not_matched_insert_all()
        .execute(),
        lambda: write_deltalake(
            path, pa.table({"day": ["c"], "n": [6], "extra": ["x"]}), mode="append",
            schema_mode="merge",
        ),
        made_anew,
    ]  # fmt: skip
    from ackfold.ledger.storage.snapshots import run_table

    db = duckdb.connect()
    with using(Store.at(str(tmp_path))):
        kept = run_table(path)
        assert _rows(tables.scan(db, path, columns=["day", "n"])) == _fresh(path)
        mine = len(opens)
        for n, change in enumerate(changes):
            change()
            anew = change is made_anew
            fresh = DeltaTable(path)
            mine += 1  # that fresh open, counted too
            scanned = tables.scan(db, path, columns=["day", "n"])
            assert _rows(scanned) == _fresh(path), f"after change {n}"
            assert run_table(path).version() == fresh.version(), f"after change {n}"
            assert (run_table(path) is kept) != anew, f"after change {n}"
            log = appended_since(path, None)
            assert log.version == fresh.version()
            files = sorted(f.uri.rsplit("/", 1)[-1] for f in log.files)
            assert files == sorted(u.rsplit("/", 1)[-1] for u in fresh.file_uris())
            reader = SqlReader(str(tmp_path))
            (counted,) = reader.query("t", ["count(*) AS n"], required=True)
            assert counted["n"] == fresh.to_pyarrow_table().num_rows, f"after change {n}"
            mine += 2  # the fresh reads of `_fresh` and of the count above
            if anew:
                mine += 1  # the new table, opened once
        assert len(opens) == mine, opens


def test_outside_a_run_each_read_opens_its_table(tmp_path: Path) -> None:
    """No run holds the thread (the UI, a script): nothing is kept across reads, as before.
    Within a run the thread's table is given, refreshed."""
    from ackfold.ledger.storage.snapshots import run_table

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"n": [1]}))
    assert run_table(path) is not run_table(path)
    with using(Store.at(str(tmp_path))):
        kept = run_table(path)
        write_deltalake(path, pa.table({"n": [2]}), mode="append")
        assert run_table(path) is kept
        assert kept.version() == 1
    assert run_table(path) is not kept


def test_an_embedded_quality_run_reads_each_table_from_the_runs_snapshot(
    tmp_path: Path, opens: list[str]
) -> None:
    """The quality checks' reads (`ackfold.quality.duck_reads`) take the run's kept table
    too: a quality run of a small reconciled ledger opens each ledger table it reads once.
    Before, the checks' reads opened them again (twice each). The operational tables the
    run creates (replay_log, ...) are opened around their creation, as any run's are."""
    from ackfold.runs.quality import run_quality

    settings, _, _ = _reconciled(tmp_path, acked=lambda n: True)
    before = len(opens)
    result = _in_a_thread(lambda: run_quality(settings, engine="embedded"))
    counted = Counter(uri.rstrip("/").rsplit("/", 1)[-1] for uri in opens[before:])
    assert result is not None
    read = {table: counted[table] for table in ("ack_events", "roots", "root_state")}
    assert read == {"ack_events": 1, "roots": 1, "root_state": 1}, counted
