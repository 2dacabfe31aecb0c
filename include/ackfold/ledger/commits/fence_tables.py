"""The tables a fence reads and commits (`ackfold.ledger.commits.fence`): a table at its
latest version, or refused as unreadable, since the fence cannot hold a table it cannot
read (`table_at`); a commit of nothing but transactions, which claims a table
(`commit_nothing`); and the checkpoint after each commit (`checkpointed`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ackfold.ledger.errors import FenceUnreadable
from ackfold.ledger.reading.sql import first_line
from ackfold.ledger.storage.run_store import options_for
from ackfold.ledger.storage.store import delta_uri

T = TypeVar("T")


def commit_nothing(table: Any, properties: Any) -> None:
    """A delta-rs commit of `table` with no file: the transactions of `properties` only.

    An append of no rows, not `create_write_transaction`: deltalake 1.0's drops the
    commit's application transactions (the marks and the fence), its writes keep them."""
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(
        table,
        pa.schema(table.schema().to_arrow()).empty_table(),
        mode="append",
        partition_by=list(table.metadata().partition_columns) or None,
        commit_properties=properties,
    )
    table.update_incremental()  # to the version it committed, as a write leaves it


def checkpointed(action: Callable[[Any, Any], T]) -> Callable[[Any, Any], T]:
    """`action(table, properties)`, then the ledger's checkpoint at its interval."""
    from ackfold.ledger.storage.checkpoints import checkpoint_at_interval

    def run(table: Any, properties: Any) -> T:
        result = action(table, properties)
        checkpoint_at_interval(table)
        return result

    return run


def table_at(
    path: str,
    *,
    missing_ok: bool = False,
    what: str = "",
    read: Callable[[str], Any] | None = None,
) -> Any:
    """The table at `path` (a warehouse path as Spark or delta-rs spells it) at its latest
    version: fresh, or `read(path)`; None if `missing_ok` and there is no table there. Any
    other error reading it is a `FenceUnreadable` (with `missing_ok`): the fence cannot
    hold a table it cannot read."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        if read is not None:
            return read(path)
        return DeltaTable(delta_uri(path), storage_options=options_for(path))
    except TableNotFoundError:
        if not missing_ok:
            raise
        return None
    except Exception as exc:
        if not missing_ok:
            raise
        raise FenceUnreadable(
            f"the {what or 'fence'} could not read {path} ({first_line(exc)}): the run "
            "stops rather than commit unfenced; run it again once the store answers"
        ) from exc
