"""One `DeltaTable` per ledger table, kept across a run's commits and brought up to date
with delta-rs's `update_incremental` instead of opened again (issue 55).

Opening a table reads its last checkpoint and the commits after it: about 5 to 10 ms on
a local disk, a dozen requests on S3, and a soak's month opened tables 10,900 times (a
third of its time), most of them to read again a table the same run had just read.
`update_incremental` reads only the commits since the snapshot, so a refreshed table is
at the latest version, as a fresh open would be: the fence's checks, which read the
table's lease epoch before each commit, see every commit that landed since.

A snapshot is only brought forward, never trusted as it is: `table` refreshes it each
time it is asked for. A table deleted and made anew at its path (a reset, a restore, a
test; the soak makes `root_state` anew in an older layout) must not be read or written
from the old one's snapshot, so the commit file a snapshot last read is looked at first:
a stat on a local disk (inode, size, time), a HEAD on an object store (ETag, size, time).
If it is gone or another file, the table is opened afresh.

The tables are kept per thread (a `DeltaTable` is not shared across threads) and shared
by every `Snapshots` of the thread with the same storage options: a run's writer, its
fence and the next run's find the table read already (the 64 used last per thread).
So a table object held across a step can move forward under its holder when the same
thread commits through it meanwhile: `Fence.commit` reads its epoch again when it moved.
`OPENED` counts the tables opened, by path (for tests and profiles).

A run's reads take the same tables (`run_table`): the embedded engine's scans, the mark,
the layout check, the run's `SqlReader`s. Where no run holds the thread (the UI, a script)
they open the table afresh, as before: nothing is kept across their reads.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> path = tempfile.mkdtemp() + "/t"
    >>> write_deltalake(path, pa.table({"a": [1]}))
    >>> snapshots = Snapshots()
    >>> first = snapshots.table(path)
    >>> write_deltalake(path, pa.table({"a": [2]}), mode="append")  # another writer
    >>> again = snapshots.table(path)
    >>> again is first, again.version(), OPENED[path]
    (True, 1, 1)
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

from ackfold.ledger.storage.run_store import Store, current_store
from ackfold.ledger.storage.store import delta_uri, is_object_store, object_store_of, split_location

log = logging.getLogger("ackfold.ledger.storage.snapshots")

# Tables opened (not refreshed) through a `Snapshots`, by delta-rs URI.
OPENED: Final[Counter[str]] = Counter()
# A snapshot's version and the identity of its commit file (`_identity`); None: unknown.
_Stamp = tuple[int, Any] | None
# The object stores the commit files are looked up in, by container and options.
_STORES: dict[tuple[str, Any], Any] = {}
# Per thread: (URI, storage options) -> (the table, its stamp), the last used last.
_KEPT = threading.local()
KEEP: Final = 64


class Snapshots:
    """The `DeltaTable`s of one writer or fence, per thread, kept up to date. `storage_options`
    go to delta-rs; or `store` (the run's `Store`) gives them, and its object store looks
    up the commit files."""

    def __init__(
        self, storage_options: Mapping[str, str] | None = None, *, store: Store | None = None
    ) -> None:
        if store is not None:
            storage_options = store.storage_options
        self.store = store
        self.storage_options = dict(storage_options) if storage_options else None
        self._options = tuple(sorted((self.storage_options or {}).items()))

    def table(self, path: str) -> Any:
        """The table at `path` (a warehouse path, any spelling), at its latest version: the
        kept one refreshed, or opened if there is none yet or it cannot be refreshed.
        Raises what `DeltaTable(...)` raises (`TableNotFoundError`, ...)."""
        uri = delta_uri(path)
        kept, key = self._kept(), (uri, self._options)
        found = kept.pop(key, None)
        if found is not None:
            table, stamp = found
            if _same(uri, stamp, self.storage_options, self._store_of(uri)):
                try:
                    table.update_incremental()
                except Exception as exc:  # a log cleaned past it, a store restarting: afresh
                    log.debug("snapshots: %s opened again (%s)", uri, exc)
                else:
                    if stamp is not None and table.version() == stamp[0]:
                        kept[key] = (table, stamp)  # no commit since: the file just checked
                    else:
                        self.keep(uri, table)
                    return table
        table = self.open(uri)
        self.keep(uri, table)
        return table

    def open(self, path: str) -> Any:
        """The table at `path`, opened afresh (and counted in `OPENED`), not kept."""
        from deltalake import DeltaTable

        uri = delta_uri(path)
        table = DeltaTable(uri, storage_options=self.storage_options)
        OPENED[uri] += 1
        return table

    def keep(self, path: str, table: Any) -> None:
        """Keep `table` (the table at `path`, just read) as this thread's snapshot of it."""
        uri = delta_uri(path)
        kept = self._kept()
        kept.pop((uri, self._options), None)
        kept[(uri, self._options)] = (
            table,
            _stamp(uri, table, self.storage_options, self._store_of(uri)),
        )
        while len(kept) > KEEP:
            kept.pop(next(iter(kept)))

    def forget(self, path: str) -> None:
        """Drop this thread's snapshot of the table at `path`: the next `table` opens it."""
        self._kept().pop((delta_uri(path), self._options), None)

    def _store_of(self, uri: str) -> Store | None:
        """The run's store, when it holds `uri`."""
        return self.store if self.store is not None and self.store.covers(uri) else None

    def _kept(self) -> dict[tuple[str, Any], tuple[Any, _Stamp]]:
        found: dict[tuple[str, Any], tuple[Any, _Stamp]] = _KEPT.__dict__.setdefault("tables", {})
        return found


def run_table(path: str, storage_options: Mapping[str, str] | None = None) -> Any:
    """The table at `path` (any spelling) at its latest version, for a read. Within a run
    on a store that holds `path` (`run_store.using`), the thread's kept snapshot refreshed,
    the one the run's writer and fence commit through (`Snapshots.table`): what a fresh
    open reads, without one. Elsewhere (the UI, a script), or with `storage_options`
    (None: the store's) other than the run's, the table opened afresh with them. Raises
    what `DeltaTable(...)` raises (`TableNotFoundError`, ...)."""
    store = current_store(path)
    options = dict(storage_options) if storage_options else None
    if store is not None and (storage_options is None or options == store.storage_options):
        return Snapshots(store=store).table(path)
    from deltalake import DeltaTable

    return DeltaTable(delta_uri(path), storage_options=options)


def _identity(
    uri: str, version: int, options: Mapping[str, str] | None, store: Store | None
) -> Any:
    """What tells the commit file of `version` of the table at `uri` from another file at
    its path: (inode, size, mtime) on a local disk, (ETag, size, time) on an object store
    (by one HEAD, through `store`'s client if given); None if there is no such file or it
    cannot be read."""
    name = f"_delta_log/{version:020d}.json"
    if not is_object_store(uri):
        try:
            found = os.stat(os.path.join(uri.removeprefix("file://"), name))
        except OSError:
            return None
        return (found.st_ino, found.st_size, found.st_mtime_ns)
    import obstore

    base, prefix = split_location(uri)
    if store is not None and split_location(store.uri)[0] == base:
        objects = store.object_store()
    else:
        key = (base, tuple(sorted((options or {}).items())))
        objects = _STORES.get(key)
        if objects is None:
            objects = _STORES[key] = object_store_of(uri, options)
    try:
        meta = obstore.head(objects, f"{prefix}/{name}")
    except Exception:  # gone (a table made anew, a log cleaned), or the store not answering
        return None
    return (meta.get("e_tag"), meta.get("size"), str(meta.get("last_modified")))


def _stamp(uri: str, table: Any, options: Mapping[str, str] | None, store: Store | None) -> _Stamp:
    """The stamp of `table`'s snapshot: its version and its commit file's identity; None
    when that file cannot be told (a version read from a checkpoint alone): then the table
    is opened afresh next time."""
    version = int(table.version())
    found = _identity(uri, version, options, store)
    return None if found is None else (version, found)


def _same(uri: str, stamp: _Stamp, options: Mapping[str, str] | None, store: Store | None) -> bool:
    """Whether the table at `uri` is still the one a snapshot stamped `stamp` was read from:
    its commit file is there, the same file."""
    return stamp is not None and _identity(uri, stamp[0], options, store) == stamp[1]
