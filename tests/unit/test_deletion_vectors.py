"""Deletion vectors, read from the log per file. A ledger table that lists the
`deletionVectors` feature but whose files have no vector (it never deleted a row, or its
vectors were purged) reads as any other; one with a vector on a file is refused before
anything is read, with an error that names the way out. The tables with vectors come
from Spark, once (`tests/deletion_vector_ledger.py`, checked in
`tests/spark/test_deletion_vectors.py`): no JVM here."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from deltalake import DeltaTable

from ackfold.cli import main as cli
from ackfold.config import Settings, load_settings
from ackfold.embedded import tables
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.errors import UnreadableFiles
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, ROOTS
from ackfold.ledger.storage.vectors import files_with_deletion_vectors
from ackfold.runs.reconcile import run_reconcile
from ackfold.track.tracker import Tracker
from tests.deletion_vector_ledger import (
    FIXTURES,
    NOW,
    PURGED,
    SPREAD_NOW,
    STATE_WITH_VECTORS,
    WITH_VECTORS,
    rows,
    write_ledger,
)


def _opens_the_feature() -> bool:
    try:
        DeltaTable(str(FIXTURES / PURGED / ACK_EVENTS))
    except Exception:  # deltalake's error for an unsupported reader feature
        return False
    return True


OPENS = _opens_the_feature()
# deltalake 1.0 (the lowest end, Airflow 3.0's constraints) opens no table that lists
# the feature: only the last test here runs there.
reads_the_feature = pytest.mark.skipif(not OPENS, reason="this deltalake opens no such table")


@pytest.fixture(autouse=True)
def _own_var_dir(clean_env: None) -> None:
    """No settings of the caller's (ACKFOLD_*) reach these ledgers."""


def _settings(tmp_path: Path, name: str) -> Settings:
    return load_settings(var_dir=tmp_path / name)


def _states(settings: Settings) -> list[tuple[int, str, int, int]]:
    """root_state as (root_id, status, xor_acc, event_count), by DuckDB over its files."""
    rel = tables.scan(
        duckdb.connect(),
        f"{settings.table_root}/{ROOT_STATE}",
        columns=["root_id", "status", "xor_acc", "event_count"],
    )
    return sorted(rel.fetchall())


def _add_feature(path: str) -> None:
    """The deletionVectors feature on the table at `path`, as another tool would turn it
    on (delta-rs here): the protocol lists it; no file has a vector."""
    from deltalake import TableFeatures

    DeltaTable(path).alter.add_feature(
        TableFeatures.DeletionVectors, allow_protocol_versions_increase=True
    )
    assert "deletionVectors" in (DeltaTable(path).protocol().reader_features or [])


@reads_the_feature
def test_tables_with_the_feature_and_no_vector_reconcile_as_any_other(tmp_path: Path) -> None:
    plain, featured = _settings(tmp_path, "plain"), _settings(tmp_path, "featured")
    for settings in (plain, featured):
        write_ledger(Path(settings.table_root))
    for name in (ROOTS, ACK_EVENTS):
        _add_feature(f"{featured.table_root}/{name}")
    expected = run_reconcile(plain, now=NOW, engine="embedded")
    summary = run_reconcile(featured, now=NOW, engine="embedded")
    assert summary["by_status"] == expected["by_status"] == {"completed": 4}
    assert _states(featured) == _states(plain)

    # root_state too, and a run that reads it back: the same statuses, still.
    _add_feature(f"{featured.table_root}/{ROOT_STATE}")
    later = NOW + timedelta(days=2)
    assert (
        run_reconcile(featured, now=later, engine="embedded")["by_status"]
        == (run_reconcile(plain, now=later, engine="embedded")["by_status"])
    )
    assert _states(featured) == _states(plain)


@reads_the_feature
def test_a_table_with_vectors_is_refused_naming_the_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _settings(tmp_path, "var")
    shutil.copytree(FIXTURES / WITH_VECTORS, settings.table_root)
    events = f"{settings.table_root}/{ACK_EVENTS}"
    (vectored,) = files_with_deletion_vectors(DeltaTable(events))
    with pytest.raises(UnreadableFiles) as refused:
        run_reconcile(settings, now=NOW, engine="embedded")
    message = str(refused.value)
    assert message.startswith(f"{events} has deletion vectors on 1 data file(s) (e.g. {vectored})")
    assert f"REORG TABLE delta.`{events}` APPLY (PURGE)" in message
    assert "'delta.enableDeletionVectors' = 'false'" in message

    # The CLI says the same, in one line.
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    assert cli.run(["reconcile"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"ackfold: {message}"


@reads_the_feature
def test_a_root_state_with_vectors_is_refused_by_name_once_the_engine_runs(
    tmp_path: Path,
) -> None:
    """The table the fold reads back is checked as `ack_events` is: with something new
    to fold, the run stops before reading, naming root_state and the property."""
    settings = _settings(tmp_path, "var")
    shutil.copytree(FIXTURES / STATE_WITH_VECTORS, settings.table_root)
    late = Tracker("orders", clock=lambda: SPREAD_NOW)
    late.ack(late.spout("m9"), stage="store")  # something new: the engine runs
    LedgerWriter(settings.table_root).append(late.drain_roots(), late.drain())
    with pytest.raises(
        UnreadableFiles, match=r"root_state.*delta\.enableDeletionVectors"
    ) as raised:
        run_reconcile(settings, now=SPREAD_NOW + timedelta(minutes=1), engine="embedded")
    assert "REORG TABLE" in str(raised.value)


@reads_the_feature
def test_vectors_are_found_through_a_checkpoint_too(tmp_path: Path) -> None:
    """A checkpoint (delta-rs's here) holds the vector of each file it lists: the files
    read from it, and the commits after it, are what counts."""
    import pyarrow as pa
    from deltalake import write_deltalake

    shutil.copytree(FIXTURES / WITH_VECTORS, tmp_path / "w")
    events = str(tmp_path / "w" / ACK_EVENTS)
    before = files_with_deletion_vectors(DeltaTable(events))
    DeltaTable(events).create_checkpoint()
    assert files_with_deletion_vectors(DeltaTable(events)) == before
    # A commit after the checkpoint that adds a plain file adds no vector.
    schema = DeltaTable(events).schema().to_arrow()
    one = pa.Table.from_pylist([], schema=pa.schema(schema))
    write_deltalake(events, one, mode="append")
    assert files_with_deletion_vectors(DeltaTable(events)) == before


@reads_the_feature
def test_the_way_out_works_the_purged_ledger_folds_without_the_deleted_events(
    tmp_path: Path,
) -> None:
    """After `REORG TABLE ... APPLY (PURGE)` the table still lists the feature, and its
    files hold exactly the rows left after the DELETE: it folds as a ledger that never
    had the deleted events."""
    settings, twin = _settings(tmp_path, "purged"), _settings(tmp_path, "twin")
    shutil.copytree(FIXTURES / PURGED, settings.table_root)
    events = DeltaTable(f"{settings.table_root}/{ACK_EVENTS}")
    assert "deletionVectors" in (events.protocol().reader_features or [])
    assert files_with_deletion_vectors(events) == []
    _, _, victim = rows()
    write_ledger(Path(twin.table_root), without=victim)
    summary = run_reconcile(settings, now=NOW, engine="embedded")
    assert summary["by_status"] == run_reconcile(twin, now=NOW, engine="embedded")["by_status"]
    assert _states(settings) == _states(twin)
    assert victim not in {row[0] for row in _states(settings)}  # its events are gone


@reads_the_feature
def test_the_cli_and_the_ui_read_a_root_state_with_vectors_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's and the UI's reads go through delta-rs's own engine, which applies the
    vectors: the root deleted in Spark is not listed, and the UI's counts (from the log's
    row counts where no file has a vector) leave it out too."""
    import json

    from ackfold.ledger.schema.ids import format_id
    from ackfold.ui.queries import UiReader

    shutil.copytree(FIXTURES / STATE_WITH_VECTORS, tmp_path / "w")
    warehouse = str(tmp_path / "w")
    _, _, victim = rows(spread=True)
    assert len(files_with_deletion_vectors(DeltaTable(f"{warehouse}/{ROOT_STATE}"))) == 1
    monkeypatch.setenv("ACKFOLD_WAREHOUSE", warehouse)
    assert cli.run(["roots", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 3
    assert format_id(victim) not in {root["root_id"] for root in listed}
    # A month of whole days: the overview would count each partition's roots from the
    # log's row counts, which include the deleted row.
    overview = UiReader(warehouse).overview(None)
    assert overview.bucket_seconds == 86400
    assert overview.counts["completed"] == overview.ingested == 3
    assert sum(sum(b.counts.values()) for b in overview.buckets) == 3


@reads_the_feature
def test_arrow_reads_of_a_root_state_with_the_feature_and_no_vector(tmp_path: Path) -> None:
    """delta-rs's Arrow dataset refuses any table that lists the feature; the reconcile's
    read that uses one (the roots settled before a day) gets a dataset of the files
    themselves, with the partition values of the log."""
    from datetime import date

    from ackfold.ledger.schema.tables import Ledger
    from ackfold.reconcile.state import settled_before

    settings = _settings(tmp_path, "var")
    write_ledger(Path(settings.table_root))
    run_reconcile(settings, now=NOW, engine="embedded")
    _add_feature(f"{settings.table_root}/{ROOT_STATE}")
    ids = {row[0] for row in _states(settings)}
    assert settled_before(Ledger(settings.table_root), ids, date(2026, 11, 23)) == ids
    assert settled_before(Ledger(settings.table_root), ids, date(2026, 11, 22)) == set()


@pytest.mark.skipif(OPENS, reason="this deltalake opens such tables")
def test_a_deltalake_that_opens_no_such_table_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """deltalake 1.0 (Airflow 3.0's constraints) opens no table that lists the feature,
    purged or not: the CLI says so in one line, with the two ways out (run at the lowest
    end of ackfold's dependencies)."""
    shutil.copytree(FIXTURES / PURGED, tmp_path / "w")
    monkeypatch.setenv("ACKFOLD_WAREHOUSE", str(tmp_path / "w"))
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path / "var"))
    assert cli.run(["reconcile"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ackfold: cannot read {tmp_path / 'w' / ACK_EVENTS}: ")
    assert "opens no table that lists the deletionVectors feature" in line
    assert "deltalake 1.6 or later, or rewrite it without the feature" in line
