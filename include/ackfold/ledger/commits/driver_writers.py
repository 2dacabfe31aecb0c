"""The one delta-rs writer of each warehouse that a process commits through: a Spark
driver's on a warehouse of this machine (`driver_writer`), and every process's on an
object store (`object_store_writer`), where delta-rs's conditional writes are the only
commit protocol (`docs/decisions/object-stores.md`). One per warehouse, so that each
table's schema is checked once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.errors import MissingDeltaRs
from ackfold.ledger.schema.tables import Ledger, local_dir
from ackfold.ledger.storage.store import is_object_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def driver_writer(spark: SparkSession, ledger: Ledger) -> LedgerWriter | None:
    """The delta-rs writer of `ledger` where this process commits its rows: a classic
    session (this is its driver) on a warehouse of this machine, and any process on an
    object store (the only commit protocol there: `docs/decisions/object-stores.md`);
    else None, and Spark appends (a local warehouse under Spark Connect, HDFS).

    Under Spark Connect a stage's batch runs in a Python worker of the server: on an object
    store that worker commits, with the server's environment, and must import deltalake."""
    directory = local_dir(ledger.root)
    if directory is None:
        if not is_object_store(ledger.root):
            return None
        _require_deltalake(ledger.root)
        key = ledger.root
    elif _connect_session(spark):
        return None
    else:
        key = str(directory)
    found = _DRIVER_WRITERS.get(key)
    if found is None:
        found = _DRIVER_WRITERS[key] = LedgerWriter(directory or ledger.root)
    return found


def _connect_session(spark: SparkSession) -> bool:
    """A Spark Connect session (nothing on this side has a JVM), told by its class's module:
    the ledger does not import `ackfold.spark` (`ackfold.spark.is_connect` says the same)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def object_store_writer(warehouse: str) -> LedgerWriter:
    """The delta-rs writer of a ledger on an object store, with the environment's storage
    options: what every commit there goes through (the embedded engine's too)."""
    _require_deltalake(warehouse)
    found = _DRIVER_WRITERS.get(warehouse)
    if found is None:
        found = _DRIVER_WRITERS[warehouse] = LedgerWriter(warehouse)
    return found


def _require_deltalake(warehouse: str) -> None:
    try:
        import deltalake  # noqa: F401
    except ImportError:
        raise MissingDeltaRs(
            f"the warehouse {warehouse} is on an object store, where every ledger commit is "
            "delta-rs's (conditional writes), and this Python cannot import deltalake: "
            "install deltalake==1.6.6 here (on a Spark Connect server: in the Python its "
            "workers run, PYSPARK_PYTHON), with the store's credentials in its environment"
        ) from None


# One writer per warehouse: it checks each table's schema once.
_DRIVER_WRITERS: dict[str, LedgerWriter] = {}
