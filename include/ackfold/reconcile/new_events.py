"""What a reconcile reads: the `ack_events` files appended after the mark of what its
scope has folded (`ackfold.ledger.commits.marks`), in slices, for both engines.

`new_events` reads them from the table's log (`ackfold.embedded.log.appended_since`: the
whole table, loudly, when the log or a file is gone); `slices` cuts them into the steps
a run folds one at a time, each ending where a version ends, so the mark can move on
after it.

Example:
    >>> appends, mark = new_events(Ledger("/srv/warehouse"), None)        # doctest: +SKIP
    >>> [(len(files), upto) for files, upto in slices(appends, 512 << 20)]  # doctest: +SKIP
    [(3, 44)]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Final

from ackfold.embedded.log import Appends, DataFile, absolute_uri, appended_since
from ackfold.ledger.commits.marks import events_table, read_mark
from ackfold.ledger.schema.tables import ACK_EVENTS, Ledger
from ackfold.ledger.storage.run_store import options_for
from ackfold.ledger.storage.store import delta_uri

_UNITS: Final = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def new_events(ledger: Ledger, app: str | None) -> tuple[Appends, int | None]:
    """The files appended to `ack_events` after the mark of `app`'s runs, up to its
    current version, and that mark (None: none, and the whole table is read)."""
    table = events_table(ledger)
    events_id = str(table.metadata().id)
    mark = read_mark(ledger, app, events_id)
    path = ledger.path(ACK_EVENTS)
    return appended_since(delta_uri(path), mark, storage_options=options_for(path)), mark


def slices(appends: Appends, limit: int) -> Iterator[tuple[list[DataFile], int | None]]:
    """The files in slices of at most `limit` bytes (or one version's files, if more),
    each with the version it has read all of: a slice ends where a version does, so the
    mark can move on after it. A table read whole is one version: its slices end
    anywhere, and only the run's end moves the mark (None)."""
    batch: list[DataFile] = []
    size = 0
    for f in appends.files:
        ends_version = not batch or batch[-1].version != f.version
        if batch and size + f.size > limit and (ends_version or appends.whole):
            yield batch, None if appends.whole else batch[-1].version
            batch, size = [], 0
        batch.append(f)
        size += f.size
    if batch:
        yield batch, None if appends.whole else batch[-1].version


def oldest_in_log(ledger: Ledger, files: Sequence[DataFile]) -> datetime | None:
    """The earliest `event_time` of `files` (data files of `ack_events`) from the minimum
    the table's log keeps per file, no row read; None when the log cannot tell (a file
    without its statistics, or no longer in the table). Delta keeps a timestamp to the
    millisecond, rounded down: the day of the result is the day of the exact minimum.

    It spares a whole job over the new events before the fold (`Reconciler.step`), the
    first and so the slowest of a run: the window's first day is all it is used for.
    """
    if not files:
        return None
    table = events_table(ledger)
    actions = table.get_add_actions(flatten=True)
    if "min.event_time" not in actions.column_names:
        return None  # no file of the table has its statistics
    base = table.table_uri.rstrip("/")
    paths = actions.column("path").to_pylist()
    minimums = dict(zip(paths, actions.column("min.event_time").to_pylist(), strict=True))
    known = {absolute_uri(base, path): low for path, low in minimums.items()}
    lows = [known.get(f.uri) for f in files]
    if any(low is None for low in lows):
        return None
    oldest: datetime = min(low for low in lows if low is not None)
    return oldest


def byte_limit(text: str) -> int:
    """`reconcile.max_bytes_per_batch` in bytes.

    Example:
        >>> byte_limit("512m"), byte_limit("4096")
        (536870912, 4096)
    """
    unit = text[-1].lower()
    return int(text[:-1]) * _UNITS[unit] if unit in _UNITS else int(text)
