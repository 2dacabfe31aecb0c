"""What a Delta table gained since a version: the data files of its appends, from its log.

A reconcile folds each `ack_events` append once. Spark's streaming source knows what it
has read from its checkpoint; the embedded engine knows it from the mark both engines
share (`ackfold.reconcile.quiet`: the table's id and the version folded up to), and reads
the commits after it from `_delta_log`:

- a commit's `add` actions with `dataChange: true` are new rows;
- a commit that also removes data (maintenance deleting the events of long-settled
  roots) changes rows rather than adding them, and is skipped whole, as Spark's
  `skipChangeCommits` does;
- files added without `dataChange` (compaction) hold rows that were folded already.

When the log cannot say, the whole current table is the answer, and the fold's
de-duplication keeps it exact (`Appends.whole`), with a warning that names the table and
what is missing:

- a commit file that is gone (log retention outlived by a long outage);
- a data file that is gone: appended after the mark, rewritten since by compaction (whose
  files are no new rows), and deleted by VACUUM. Only files that a later commit of the
  range removed are looked for: a file the table still holds is there.

The table's protocol is checked first: its data files must hold its rows as they are
(`ackfold.ledger.storage.vectors.require_plain_files`).

Example:
    >>> appends = appended_since("/srv/warehouse/ack_events", 41)   # doctest: +SKIP
    >>> appends.version, len(appends.files)                            # doctest: +SKIP
    (44, 3)
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ackfold.ledger.reading.sql import first_line
from ackfold.ledger.storage.add_actions import add_actions
from ackfold.ledger.storage.store import file_system

log = logging.getLogger("ackfold.embedded")


@dataclass(frozen=True)
class DataFile:
    """One parquet file of a table: its URI (as delta-rs names it), its size, and the
    version that added it (the version read, for a table read whole)."""

    uri: str
    size: int
    version: int


@dataclass(frozen=True)
class Appends:
    """The files appended to a table after one version, up to `version` (included).

    `whole` is true when the log could not say (no earlier version, or a commit file
    gone): `files` are then the whole table at `version`."""

    table_id: str
    version: int
    files: tuple[DataFile, ...]
    whole: bool

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def appended_since(
    uri: str, after: int | None, *, storage_options: Mapping[str, str] | None = None
) -> Appends:
    """The files appended to the Delta table at `uri` after version `after` (None: every
    file of the table), up to its current version."""
    from ackfold.ledger.storage.snapshots import run_table
    from ackfold.ledger.storage.vectors import require_plain_files

    table = run_table(uri, storage_options)  # in a run, its kept snapshot, refreshed
    require_plain_files(table, uri)
    version = int(table.version())
    table_id = str(table.metadata().id)
    if after is not None and after >= version:
        return Appends(table_id, version, (), whole=False)
    if after is not None:
        files = _from_log(table, uri, after, version)
        if files is not None:
            return Appends(table_id, version, files, whole=False)
    return Appends(table_id, version, _current(table, version), whole=True)


def _current(table: Any, version: int) -> tuple[DataFile, ...]:
    actions = add_actions(table).select(["path", "size_bytes"])
    base = table.table_uri.rstrip("/")
    return tuple(
        DataFile(absolute_uri(base, path), int(size), version)
        for path, size in zip(*actions.to_pydict().values(), strict=True)
    )


def _from_log(table: Any, uri: str, after: int, version: int) -> tuple[DataFile, ...] | None:
    """The data files of the appends in versions after..version, or None (with a warning)
    if the log no longer holds one of those commits, or one of those files is gone."""
    store = file_system(table.table_uri, table._storage_options)
    base = table.table_uri.rstrip("/")
    added: dict[str, DataFile] = {}
    removed: set[str] = set()
    for v in range(after + 1, version + 1):
        name = f"_delta_log/{v:020d}.json"
        try:
            with store.open_input_file(name) as handle:
                text = handle.read().decode("utf-8")
        except (FileNotFoundError, OSError) as exc:
            log.warning(
                "%s: the log from version %d on is gone (log retention: %s); reading the "
                "whole table, and dropping what was folded already",
                uri, v, first_line(exc),
            )  # fmt: skip
            return None
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        removed.update(unquote(a["remove"]["path"]) for a in actions if "remove" in a)
        if any(a["remove"].get("dataChange", True) for a in actions if "remove" in a):
            continue  # rows changed, none added: skipChangeCommits
        for action in actions:
            add = action.get("add")
            if add and add.get("dataChange", True):
                path = unquote(add["path"])
                added[path] = DataFile(absolute_uri(base, add["path"]), int(add.get("size", 0)), v)
    gone = _missing(store, sorted(removed & set(added)))
    if gone:
        log.warning(
            "%s: %d data file(s) appended after version %d are gone (compacted, then "
            "vacuumed), e.g. %s; reading the whole table, and dropping what was folded "
            "already",
            uri, len(gone), after, added[gone[0]].uri,
        )  # fmt: skip
        return None
    return tuple(added.values())


def _missing(store: Any, paths: list[str]) -> list[str]:
    """The `paths` (relative to the table) that `store` no longer holds."""
    if not paths:
        return []
    import pyarrow.fs as pafs

    found = pafs.PyFileSystem(store).get_file_info(paths)
    return [p for p, info in zip(paths, found, strict=True) if info.type == pafs.FileType.NotFound]


def absolute_uri(base: str, path: str) -> str:
    """The URI of a data file from its table's URI and its path in the log (relative
    and URL-encoded, or absolute)."""
    if "://" in path:
        return path
    return posixpath.join(base, unquote(path))
