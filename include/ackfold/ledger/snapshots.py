"""One `DeltaTable` per ledger table, kept across a run's commits and brought up to date
with delta-rs's `update_incremental` instead of opened again (issue 55).

Opening a table reads its last checkpoint and the commits after it: about 5 to 10 ms on
a local disk, a dozen requests on S3, and a soak's month opened tables 10,900 times (a
third of its time), most of them to read again a table the same run had just read.
`update_incremental` reads only the commits since the snapshot, so a refreshed table is
at the latest version, as a fresh open would be: the fence's checks, which read the
table's lease epoch before each commit, see every commit that landed since.

A snapshot is only brought forward, never trusted as it is: `table` refreshes it each
time it is asked for. On a local disk a table deleted and made anew at its path (a reset,
a test) must not be written from the old one's snapshot, so the commit file a snapshot
last read is stat-ed first (inode, size, time): if it is gone or another file, the table
is opened afresh. On an object store that check would cost a request per refresh, as
much as what it saves, and a table is not made anew under a running ledger; the snapshot
is refreshed as `LedgerWriter` has kept it since issue 38.

The tables are kept per thread (a `DeltaTable` is not shared across threads) and shared
by every `Snapshots` of the thread with the same storage options: a run's writer, its
fence and the next run's find the table read already (the 64 used last per thread).
`OPENED` counts the tables opened, by path (for tests and profiles).

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

from ackfold.ledger.store import delta_uri, is_object_store

log = logging.getLogger("ackfold.ledger.snapshots")

# Tables opened (not refreshed) through a `Snapshots`, by delta-rs URI.
OPENED: Final[Counter[str]] = Counter()
# The commit file a local snapshot last read: (version, inode, size, mtime in ns).
_Stamp = tuple[int, int, int, int] | None
# Per thread: (URI, storage options) -> (the table, its stamp), the last used last.
_KEPT = threading.local()
KEEP: Final = 64


class Snapshots:
    """The `DeltaTable`s of one writer or fence, per thread, kept up to date. `storage_options`
    go to delta-rs."""

    def __init__(self, storage_options: Mapping[str, str] | None = None) -> None:
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
            if _same(uri, stamp):
                try:
                    table.update_incremental()
                except Exception as exc:  # a log cleaned past it, a store restarting: afresh
                    log.debug("snapshots: %s opened again (%s)", uri, exc)
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
        kept[(uri, self._options)] = (table, _stamp(uri, table))  # the last used, last
        while len(kept) > KEEP:
            kept.pop(next(iter(kept)))

    def forget(self, path: str) -> None:
        """Drop this thread's snapshot of the table at `path`: the next `table` opens it."""
        self._kept().pop((delta_uri(path), self._options), None)

    def _kept(self) -> dict[tuple[str, Any], tuple[Any, _Stamp]]:
        found: dict[tuple[str, Any], tuple[Any, _Stamp]] = _KEPT.__dict__.setdefault("tables", {})
        return found


def _log_file(uri: str, version: int) -> str:
    return os.path.join(uri.removeprefix("file://"), "_delta_log", f"{version:020d}.json")


def _stamp(uri: str, table: Any) -> _Stamp:
    """The stamp of the commit file of `table`'s version: (version, inode, size, mtime in
    ns); None on an object store (not checked); (-1, ...) when there is no file to stat (a
    version read from a checkpoint alone): then it is opened afresh next time."""
    if is_object_store(uri):
        return None
    version = int(table.version())
    try:
        found = os.stat(_log_file(uri, version))
    except OSError:
        return (-1, 0, 0, 0)
    return (version, found.st_ino, found.st_size, found.st_mtime_ns)


def _same(uri: str, stamp: _Stamp) -> bool:
    """Whether the table at `uri` is still the one a snapshot stamped `stamp` was read from:
    its commit file is there, the same file."""
    if stamp is None:
        return True
    if stamp[0] < 0:
        return False
    try:
        found = os.stat(_log_file(uri, stamp[0]))
    except OSError:
        return False
    return (stamp[0], found.st_ino, found.st_size, found.st_mtime_ns) == stamp
