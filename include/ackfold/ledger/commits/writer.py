"""Write the ledger without a JVM: create its tables and append a producer's rows, in
delta-rs (the `deltalake` package).

For producers outside Spark (a web service, a Lambda, a batch job): `Tracker.drain_roots()`
and `Tracker.drain()` give the rows, `LedgerWriter.append` writes them, and a reconcile
(Spark, as ever) folds them like any app's.

- `create` makes the missing tables as `create_tables` does in Spark: the same Delta
  schema (types, NOT NULLs), partition columns, description and `TABLE_PROPERTIES`, at
  the same protocol (reader 1, writer 2). delta-rs accepts every property; it does not
  act on `delta.autoOptimize.optimizeWrite` itself (Spark's writers and OPTIMIZE do).
  An existing table is only checked, never altered: one without a column added after
  contract v1 is written in its own layout (`ackfold.ledger.setup.upgrade`).
- `append` checks every row against the contract before it writes anything, then
  appends `roots`, then `ack_events` (a reconcile never meets an event before its root).
  With `app_id` and `version` (Spark's `txnAppId`/`txnVersion`) each commit records a
  Delta application transaction, and a table that already holds that version for that
  app id is skipped: a retry after a crash writes what is missing, nothing twice. One app
  id belongs to one writer at a time, as in Spark.
- Every commit writes its parquet in the ledger's encoding (`ackfold.ledger.schema.encoding`:
  Zstandard; `ack_events` ordered by `root_id`, its hashes undictionaried).
- Concurrent appends, from here or from Spark apps, are safe: Delta appends do not
  conflict, and delta-rs retries its commit when another writer got there first; a
  commit it still loses is retried with backoff (`ackfold.ledger.storage.conflicts`), and the
  application transaction keeps a retry from writing twice.

Example:
    >>> import tempfile
    >>> from ackfold import LedgerWriter, Tracker
    >>> writer = LedgerWriter(tempfile.mkdtemp())
    >>> tracker = Tracker("orders", ledger=writer)  # roots in the scheme this ledger records
    >>> order = tracker.spout("order-1", source="sqs", source_queue="orders", payload="{}")
    >>> tracker.ack(order, stage="store")
    >>> roots, events = tracker.drain_roots(), tracker.drain()
    >>> writer.append(roots, events, app_id="orders-producer", version=1)
    Appended(roots=1, events=2, skipped=())
    >>> writer.append(roots, events, app_id="orders-producer", version=1)  # a retry
    Appended(roots=0, events=0, skipped=('roots', 'ack_events'))
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

from ackfold.ledger.commits.table_rows import arrow_rows, check_table, conform, writing
from ackfold.ledger.errors import MissingDeltaRs, SchemaMismatch
from ackfold.ledger.schema import schemes
from ackfold.ledger.schema.contract import ContractError, check_rows, delta_schema
from ackfold.ledger.schema.encoding import clustered, writer_properties
from ackfold.ledger.schema.optional_columns import require_roots_fit, roots_scheme
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ROOTS,
    TABLE_PROPERTIES,
    TABLES,
    Ledger,
)
from ackfold.ledger.storage.checkpoints import checkpoint_at_interval
from ackfold.ledger.storage.conflicts import retry_conflicts
from ackfold.ledger.storage.run_store import Store, store_for
from ackfold.ledger.storage.snapshots import Snapshots
from ackfold.ledger.storage.store import delta_uri

__all__ = [
    "Appended",
    "ContractError",
    "LedgerWriter",
    "MissingDeltaRs",
    "SchemaMismatch",
]

# What `append` writes, in this order.
_APPEND_ORDER: Final = (ROOTS, ACK_EVENTS)


@dataclass(frozen=True)
class Appended:
    """What one `append` wrote: rows per table, and the tables it skipped because this
    app id had already written this version there."""

    roots: int
    events: int
    skipped: tuple[str, ...]


class LedgerWriter:
    """Creates and appends the ledger's tables under `warehouse` (`Settings.table_root`)
    without a JVM. `store` is the run's store (`ackfold.ledger.storage.run_store.Store`):
    its storage options go to delta-rs, and its commit protocol is checked once. Without
    one: a store resolved for `warehouse` with `storage_options` (object store
    credentials) if given; else the current run's store, if `warehouse` is its; else
    one resolved from the environment. An `s3a://` warehouse is
    written as `s3://`: the same objects, delta-rs's spelling."""

    def __init__(
        self,
        warehouse: str | Path,
        *,
        storage_options: Mapping[str, str] | None = None,
        store: Store | None = None,
    ) -> None:
        self.ledger = Ledger(str(warehouse))
        if store is None:  # the run's store, if the warehouse is its (`store_for`)
            where = str(warehouse)
            found = store_for(where) if storage_options is None else None
            store = found or Store.at(where, options=storage_options)
        self.store = store
        self.storage_options = self.store.storage_options
        self._checked: set[str] = set()
        # The DeltaTable of each table this writer reads or commits to, per thread (the
        # stages of one driver commit from their own threads; a DeltaTable is not shared
        # across them), brought up to date before each use: on S3 a fresh load reads the
        # checkpoint and up to 9 commits again (about 25 GETs), on a local disk 5 to 10 ms.
        # A table deleted and made anew at its path is opened afresh (`snapshots`).
        self._snapshots = Snapshots(store=self.store)

    def uri(self, name: str) -> str:
        """Where delta-rs finds ledger table `name`."""
        return delta_uri(self.ledger.path(name))

    def table(self, name: str) -> Any:
        """The `deltalake.DeltaTable` of ledger table `name` (created if missing), with this
        writer's storage options: for commits beyond appends (a MERGE into a derived table
        by the run that holds the lease), through the same protocol and checks."""
        self.create([name] if name not in self._checked else [])
        with writing(self.uri(name)):
            return self._snapshots.table(self.uri(name))

    def create(self, tables: Sequence[str] = tuple(TABLES)) -> dict[str, bool]:
        """Create the tables of `tables` that do not exist yet, and check that the others
        can take the contract's rows. Returns, per table, whether this call created it.

        Example:
            >>> import tempfile
            >>> writer = LedgerWriter(tempfile.mkdtemp())
            >>> writer.create(["roots", "ack_events"])
            {'roots': True, 'ack_events': True}
            >>> writer.create(["roots"])
            {'roots': False}
        """
        from deltalake import DeltaTable, Schema
        from deltalake.exceptions import DeltaError, TableNotFoundError

        # Before the first commit: a store that ignores conditional writes is refused.
        self.store.require_conditional_writes()
        created = {}
        for name in tables:
            if name not in TABLES:
                raise ValueError(f"unknown ledger table {name!r}; tables: {', '.join(TABLES)}")
            path = self.uri(name)
            made = False
            with writing(path):
                try:
                    found = self._snapshots.table(path)
                except TableNotFoundError:
                    found = None
                if found is None:
                    _, partitions, comment = TABLES[name]
                    try:
                        DeltaTable.create(
                            path,
                            Schema.from_json(json.dumps(delta_schema(name))),
                            mode="error",
                            partition_by=list(partitions) or None,
                            description=comment,
                            configuration=dict(TABLE_PROPERTIES),
                            storage_options=self.storage_options,
                        )
                        made = True
                    except DeltaError:
                        # Another writer created it meanwhile: checked below like any other.
                        if not DeltaTable.is_deltatable(path, self.storage_options):
                            raise
                    found = self._snapshots.table(path)
                # Checked, never altered: a schema change would stop the streams that
                # read the table and fail a contract-v1 producer's plain appends.
                self._check(name, found)
            created[name] = made
        return created

    def append(
        self,
        roots: Sequence[Mapping[str, Any]] = (),
        events: Sequence[Mapping[str, Any]] = (),
        *,
        app_id: str | None = None,
        version: int | None = None,
    ) -> Appended:
        """Append `roots` rows, then `events` rows (`ack_events`), creating the tables if
        they are missing; each table is one commit, none when its rows are empty.

        `app_id` and `version` (together, or neither) make the append idempotent: give
        each unit of work the next version, and retry a failed one with the same version
        and rows. The rows, then both tables, are checked before anything is appended:
        after a `ContractError` or a `SchemaMismatch` no row was written. Duplicate
        events (same `event_id`) are written once. A `roots` table without `id_scheme`
        (contract v1) takes roots of the text scheme only (`roots_scheme`).
        """
        if (app_id is None) != (version is None):
            raise ValueError("pass app_id and version together (or neither)")
        if app_id is not None and (not isinstance(app_id, str) or not app_id.strip()):
            raise ValueError(f"app_id must be a non-empty string, got {app_id!r}")
        if version is not None and (
            isinstance(version, bool) or not isinstance(version, int) or version < 0
        ):
            raise ValueError(f"version must be an int >= 0, got {version!r}")
        rows = {ROOTS: check_rows(ROOTS, roots), ACK_EVENTS: check_rows(ACK_EVENTS, events)}
        rows[ACK_EVENTS] = list({e["event_id"]: e for e in rows[ACK_EVENTS]}.values())
        # Both tables made and checked before either is written.
        self.create([name for name in _APPEND_ORDER if name not in self._checked])
        written, skipped = {ROOTS: 0, ACK_EVENTS: 0}, []
        for name in _APPEND_ORDER:
            if not rows[name]:
                continue
            append = partial(self._append, name, rows[name], app_id, version)
            if retry_conflicts(append, what=f"append to {self.uri(name)}"):
                written[name] = len(rows[name])
            else:
                skipped.append(name)
        return Appended(written[ROOTS], written[ACK_EVENTS], tuple(skipped))

    def append_arrow(
        self, name: str, data: Any, *, app_id: str | None = None, version: int | None = None
    ) -> bool:
        """Append an Arrow table (``pyarrow.Table``) to ledger table `name` in one commit,
        without checking its rows: for rows a tracker built in the contract's columns
        (Spark's ``DataFrame.toArrow()`` of a stage's events). They are idempotent by
        their ids, so a retry may append them again; the fold reads them once. With
        `app_id` and `version`, as `append`: False, and nothing written, when this app id
        already wrote this version to the table."""
        import pyarrow as pa

        self.create([name] if name not in self._checked else [])

        def rows(schema: pa.Schema) -> pa.Table:
            if name == ROOTS and "id_scheme" in data.column_names:
                recorded = data.column("id_scheme").to_pylist()
                require_roots_fit(self.ledger.path(ROOTS), schema.names, recorded)
            return conform(data, schema)

        return bool(
            retry_conflicts(
                partial(self._append, name, rows, app_id, version),
                what=f"append to {self.uri(name)}",
            )
        )

    def roots_scheme(self, wanted: int = schemes.DEFAULT) -> int:
        """The id scheme of the roots to register into this ledger: `wanted`, or the
        text scheme where the `roots` table has no `id_scheme` column (contract v1; one
        warning names `ackfold upgrade`). `Tracker(app, ledger=writer)` asks this.

        Example:
            >>> import tempfile
            >>> LedgerWriter(tempfile.mkdtemp()).roots_scheme()  # a new ledger: every column
            2
        """
        return roots_scheme(self.ledger.path(ROOTS), self.columns(ROOTS), wanted)

    def columns(self, name: str) -> list[str] | None:
        """The columns of ledger table `name` as stored now; None if it does not exist."""
        from deltalake.exceptions import TableNotFoundError

        path = self.uri(name)
        with writing(path):
            try:
                table = self._snapshots.table(path)
            except TableNotFoundError:
                return None
            return [f["name"] for f in json.loads(table.schema().to_json())["fields"]]

    def replace_where(self, name: str, data: Any, predicate: str) -> None:
        """Replace the rows of ledger table `name` that match `predicate` (SQL over the
        table's columns, built from ackfold's own names and quoted values only) with the
        Arrow table `data`, in one commit: Delta's `replaceWhere`, in delta-rs. A derived
        table's commit carries the lease's epoch (`Unfenced` outside a turn); another
        table's does under a turn (a quality run's report needs none)."""
        from ackfold.ledger.commits.fence import DERIVED, active, commit

        self.create([name] if name not in self._checked else [])
        path = self.uri(name)

        def replace(table: Any, properties: Any) -> None:
            self.write(name, table, data, predicate=predicate, commit_properties=properties)

        what = f"replace where {predicate} in {path}"
        if name in DERIVED or active(self.ledger.root) is not None:
            commit(self.ledger.root, self.ledger.path(name), replace, what=what,
                   load=lambda: self.table(name))  # fmt: skip
        else:
            retry_conflicts(lambda: replace(self.table(name), None), what=what)
            checkpoint_at_interval(self.table(name))

    def append_fenced(self, name: str, rows: Any) -> None:
        """Append the Arrow table `rows` to ledger table `name` in one commit fenced by this
        thread's lease (`ackfold.ledger.commits.fence.commit`): a run that has lost the lease
        appends nothing (invariant 19), and raises `Unfenced` outside a turn. For the
        logs a run writes ahead (`replay_log`, `retract_log`)."""
        from ackfold.ledger.commits.fence import commit

        path = self.ledger.path(name)
        commit(
            self.ledger.root,
            path,
            lambda table, properties: self.write(name, table, rows, commit_properties=properties),
            what=f"append to {path}",
            load=lambda: self.table(name),
        )

    def write(
        self,
        name: str,
        table: Any,
        data: Any,
        *,
        predicate: str | None = None,
        commit_properties: Any = None,
    ) -> None:
        """One commit of the Arrow table `data` to `table` (the `DeltaTable` of ledger table
        `name`, as read for this commit), in the ledger's encoding: an append, or with
        `predicate` a replacement of the rows it matches. No retry and no checkpoint: the
        caller's (a fenced commit's, `ackfold.ledger.commits.fence`) reads the table again and
        calls this anew, then checkpoints (`checkpoint_at_interval`)."""
        import pyarrow as pa
        from deltalake import PostCommitHookProperties, write_deltalake

        how: dict[str, Any] = {
            "writer_properties": writer_properties(name),
            "commit_properties": commit_properties,
            "post_commithook_properties": PostCommitHookProperties(create_checkpoint=False),
        }
        with writing(self.uri(name)):
            rows = clustered(name, conform(data, pa.schema(table.schema().to_arrow())))
            if predicate is None:
                write_deltalake(table, rows, mode="append", **how)
            else:
                write_deltalake(table, rows, mode="overwrite", predicate=predicate, **how)

    def _append(self, name: str, rows: Any, app_id: str | None, version: int | None) -> bool:
        """One commit to `name` of `rows` (row mappings, or a function of the table's
        Arrow schema that returns the Arrow table); False when `app_id` already wrote
        `version`."""
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction

        path = self.uri(name)
        with writing(path):
            table = self._snapshots.table(path)  # the commits since the last append only
            properties = None
            if app_id is not None and version is not None:
                done = table.transaction_version(app_id)
                if done is not None and done >= version:
                    return False  # as Delta Spark: a txnVersion at or below the last is done
                properties = CommitProperties(app_transactions=[Transaction(app_id, version)])
            schema = pa.schema(table.schema().to_arrow())
            if callable(rows):
                data = rows(schema)  # checks roots' schemes as below
            else:  # before the first commit of `append`: nothing written if they do not fit
                data = arrow_rows(name, rows, schema, self.ledger.path(ROOTS))
        self.write(name, table, data, commit_properties=properties)
        checkpoint_at_interval(table)
        return True

    def _check(self, name: str, table: Any) -> None:
        """Raise `SchemaMismatch` unless `table` takes the contract's rows of `name`."""
        check_table(name, self.uri(name), table)
        self._checked.add(name)
