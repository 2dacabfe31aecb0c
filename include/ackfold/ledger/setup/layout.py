"""Upgrades of a ledger written by an earlier ackfold to the layout this one writes.

`root_state` was partitioned by `first_event_date` alone and kept the ids of each root's
latest and earliest-fail events (`last_event_id`, `fail_event_id`). It is now partitioned
by `first_event_date` and `status` (the reconciler reads the partitions of open roots
wherever they sit in time, and counts roots by status from file metadata), and ties
between events are broken by what the state keeps, so those two ids are gone.

`upgrade_root_state` rewrites an older table once, by delta-rs, for both engines, in one
commit that carries the lease's epoch (`ackfold.ledger.commits.fence`): a reader sees the old
version or the new one, never a mix, and the columns keep their NOT NULLs (a Spark
rewrite made them nullable, and Delta 4 cannot make a column NOT NULL again). A table
in the current layout is left as it is. The table is read whole: one upgrade, in the
memory of its rows.

Example:
    >>> upgrade_root_state(Ledger("/data/warehouse"))        # doctest: +SKIP
    False
"""

from __future__ import annotations

import logging
from importlib.metadata import version
from typing import Any

from ackfold.ledger.commits.fence import commit
from ackfold.ledger.errors import SchemaMismatch
from ackfold.ledger.schema.contract import arrow_schema
from ackfold.ledger.schema.encoding import writer_properties
from ackfold.ledger.schema.tables import ROOT_STATE, ROOT_STATE_PARTITIONS, Ledger
from ackfold.ledger.storage.run_store import options_for
from ackfold.ledger.storage.snapshots import run_table
from ackfold.version import __version__

log = logging.getLogger("ackfold.ledger")


def upgrade_root_state(ledger: Ledger) -> bool:
    """Bring `root_state` to the current layout; whether anything had to change (not
    where there is no table yet). A reconcile calls it first, before the table is checked
    or written: an upgrade that fails commits nothing, and the table stays as it was."""
    from deltalake.exceptions import TableNotFoundError

    path = ledger.path(ROOT_STATE)
    try:  # in a run, the run's kept snapshot of it, refreshed (`snapshots.run_table`)
        table = run_table(path, options_for(path))
    except TableNotFoundError:
        return False
    changed = tuple(table.metadata().partition_columns) != ROOT_STATE_PARTITIONS
    if changed:
        log.info("root_state: rewriting it partitioned by %s", ", ".join(ROOT_STATE_PARTITIONS))
        commit(ledger.root, path, _rewrite, what=f"rewriting {path}")
    return changed


def _rewrite(table: Any, properties: Any) -> None:
    """`table` (an older root_state) rewritten in one commit: the current columns, in the
    contract's types and NOT NULLs, partitioned as now."""
    from deltalake import write_deltalake

    schema = arrow_schema(ROOT_STATE)
    rows = table.to_pyarrow_table()
    missing = [name for name in schema.names if name not in rows.column_names]
    if missing:
        raise SchemaMismatch(
            f"{table.table_uri} has no column {', '.join(missing)}: it is no root_state this "
            "ackfold can bring up to date; move it away and reconcile from the events again"
        )
    try:
        write_deltalake(
            table,
            rows.select(schema.names).cast(schema),
            mode="overwrite",
            schema_mode="overwrite",
            partition_by=list(ROOT_STATE_PARTITIONS),
            writer_properties=writer_properties(ROOT_STATE),
            commit_properties=properties,
        )
    except Exception as exc:  # deltalake's DeltaError: the message tells the cause
        if "partitioning does not match" not in str(exc):
            raise
        raise SchemaMismatch(
            f"{table.table_uri} is partitioned as an earlier ackfold left it (by "
            f"{', '.join(table.metadata().partition_columns)}); bringing it up to date "
            f"repartitions it, which deltalake {version('deltalake')} cannot do (1.6 can). "
            "Run one reconcile with deltalake 1.6 or later, in a virtualenv of its own where "
            "this one's constraints hold deltalake back (pip install "
            f"'ackfold=={__version__}' 'deltalake>=1.6'), with this deployment's "
            "settings: `ackfold reconcile`. It takes the ledger's lease as any run does; "
            "later runs read the new layout on any deltalake. Its rows are as they were."
        ) from exc
