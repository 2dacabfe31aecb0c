"""Several `LedgerWriter`s appending to one ledger at once, on an object store's API: the
race each store tier runs (`tests/s3`, `tests/stores`), so that commits meet another's,
are refused by the store and retried on the next version."""

from __future__ import annotations

import threading
from typing import Any


def table_rows(table_uri: str) -> int:
    """The rows of the Delta table at `table_uri`, read through delta-rs."""
    from deltalake import DeltaTable

    from ackfold.ledger.storage.store import delta_uri, storage_options

    table = DeltaTable(delta_uri(table_uri), storage_options=storage_options(table_uri))
    return int(table.to_pyarrow_table().num_rows)


def producer_rows(n: int, app: str = "orders") -> tuple[list[Any], list[Any]]:
    """A producer's batch of `n` roots of `app`, each registered and acked by one stage."""
    from ackfold import Tracker

    tracker = Tracker(app)
    for i in range(n):
        root = tracker.spout(f"{app}-{i}", source="sqs", source_queue=app, payload="{}")
        tracker.ack(root, stage="store")
    return tracker.drain_roots(), tracker.drain()


def race_writers(warehouse: str, *, writers: int, batches: int, size: int) -> None:
    """`writers` threads released at once, each appending `batches` batches of `size`
    roots through a `LedgerWriter` of its own (an app per batch); the first error of any
    thread is raised."""
    from ackfold import LedgerWriter

    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def produce(n: int) -> None:
        writer = LedgerWriter(warehouse)
        barrier.wait()
        try:
            for b in range(batches):
                writer.append(*producer_rows(size, app=f"app{n}-{b}"))
        except BaseException as exc:  # pragma: no cover - raised below
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
