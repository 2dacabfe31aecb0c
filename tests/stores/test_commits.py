"""Every ledger commit path on GCS and ADLS is delta-rs's create-if-absent, on the local
GCS and Azure APIs: LedgerWriter (producers, a tracked app's driver), `ackfold init`, the
lease, writers racing on one table; and the read path of the CLI. Plain Python."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from ackfold import LedgerWriter
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.commits.lock import LedgerBusy
from ackfold.ledger.reading.sql import SqlReader
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, TABLES
from ackfold_dev.emulated import EmulatedStore
from tests.racing_writers import producer_rows, race_writers, table_rows


def test_racing_writers_lose_no_commit_and_a_retried_batch_lands_once(
    store: EmulatedStore, warehouse: str
) -> None:
    """Four writers append to one table at once: commits that meet another's are refused
    by the store (GCS 412, Azure 409), retried on the next version, and every row is there;
    a producer's batch sent again (its app id and version) is skipped."""
    first = LedgerWriter(warehouse)
    roots, events = producer_rows(5, app="retried")
    assert first.append(roots, events, app_id="p", version=1).roots == 5
    assert first.append(roots, events, app_id="p", version=1).skipped == (ROOTS, ACK_EVENTS)
    writers, batches, size = 4, 5, 3
    race_writers(warehouse, writers=writers, batches=batches, size=size)
    assert table_rows(f"{warehouse}/{ROOTS}") == 5 + writers * batches * size
    assert table_rows(f"{warehouse}/{ACK_EVENTS}") == 2 * (5 + writers * batches * size)
    prefix = warehouse.split("/", 3)[3]
    refused = [
        line for line in store.log_file.read_text().splitlines()
        if '"PUT ' in line and f"{prefix}/{ROOTS}/_delta_log/" in unquote(line)
        and ('" 412 ' in line or '" 409 ' in line)
    ]  # fmt: skip
    assert refused, "no commit met another's: the test did not race"


def test_init_the_lease_and_the_cli_read_path(
    warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ackfold.cli.main import run

    assert run(["init", "--warehouse", warehouse]) == 0
    assert capsys.readouterr().out.count("created ") == len(TABLES)
    assert run(["init", "--warehouse", warehouse]) == 0
    assert capsys.readouterr().out.count("exists ") == len(TABLES)

    first, second = LedgerLease(warehouse, host="a"), LedgerLease(warehouse, host="b")
    with first.held("reconcile"):
        assert (first.holder() or "").startswith("reconcile on a")
        with pytest.raises(LedgerBusy, match="reconcile on a"), second.held("replay", wait=0):
            pass
    with second.held("replay"):
        assert (first.holder() or "").startswith("replay on b")

    LedgerWriter(warehouse).append(*producer_rows(3))
    assert SqlReader(warehouse).query(ROOTS, ["count(*) AS n"], required=True) == [{"n": 3}]
