"""Per-host exclusive locks: one writer of `root_state` at a time, and one driver of each
app's queries.

Reconciles and replays both rewrite `root_state` rows with a MERGE. Delta resolves two
concurrent MERGEs into the same files by failing one of them (`ConcurrentAppendException`),
which would cost a task retry and a wasted Spark job; and two replays planning the same
root at once would both send it. So they take the ledger lock first, a replay from its
plan on: an exclusive `flock` on `<var_dir>/run/ledger-<digest>.lock`, which the kernel
releases if the holder dies, so a killed process never leaves it held. The file names the
holder for the waiting side.

The lock is per host and per warehouse: `<digest>` is `warehouse_digest` of the ledger's
location, so a reconcile of one warehouse never waits behind a reconcile of another on the
same host. `ackfold.ledger.commits.lease.ledger_turn` takes it, then the ledger's lease, which
every host sees (docs/decisions/many-hosts.md); the lock still frees the ledger the
instant a holder on this host dies.

`app_lock` is the same kind of lock for an app's streaming checkpoints, which take one
driver at a time: `ackfold demo` holds it for its report while its app DAG's runs wait.
It is per warehouse too: an app of the same name in another warehouse is another app.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> var = Path(tempfile.mkdtemp())
    >>> with ledger_lock(var, "s3://bucket/a", "doctest"):
    ...     with ledger_lock(var, "s3://bucket/a/", "nested"):  # re-entrant within a thread
    ...         with ledger_lock(var, "s3://bucket/b", "another warehouse", wait=0):
    ...             pass
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Final

from ackfold.ledger.errors import AppBusy, LedgerBusy

DEFAULT_WAIT: Final = 3600.0  # seconds: longer than any reconcile or replay run
_POLL: Final = 0.5
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_DIGEST_CHARS: Final = 16

_held = threading.local()


def warehouse_digest(warehouse: str) -> str:
    """A stable short digest of a warehouse's location, for names of per-warehouse files.

    Spellings of one location give one digest: a trailing `/`, the scheme's case, and for a
    local path (or `file://`) a relative or `~` form of the same directory.

    Example:
        >>> warehouse_digest("s3://bucket/wh/") == warehouse_digest("S3://bucket/wh")
        True
        >>> warehouse_digest("s3://bucket/wh") != warehouse_digest("s3://bucket/wh2")
        True
        >>> len(warehouse_digest("/tmp/wh"))
        16
    """
    text = warehouse.strip()
    scheme = _SCHEME.match(text)
    if scheme is None or scheme.group(1).lower() == "file":
        local = text[len(scheme.group(0)) :] if scheme else text
        canonical = "file://" + str(Path(local).expanduser().resolve())
    else:
        canonical = scheme.group(1).lower() + "://" + text[len(scheme.group(0)) :].rstrip("/")
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:_DIGEST_CHARS]


def lock_path(var_dir: Path, warehouse: str) -> Path:
    """The ledger lock's file for the ledger under `warehouse` (`Settings.table_root`)."""
    return var_dir / "run" / f"ledger-{warehouse_digest(warehouse)}.lock"


def app_lock_path(var_dir: Path, warehouse: str, app: str) -> Path:
    """`app`'s lock file, for the app's ledger under `warehouse`."""
    return var_dir / "run" / f"app-{app}-{warehouse_digest(warehouse)}.lock"


@contextmanager
def ledger_lock(
    var_dir: Path,
    warehouse: str,
    holder: str,
    *,
    wait: float = DEFAULT_WAIT,
    say: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold this host's lock of the ledger under `warehouse` for the block (its file in
    `var_dir`); re-entrant within a thread, per warehouse.

    Waits up to `wait` seconds for another holder (saying once who it is), then raises
    `LedgerBusy` naming the holder.
    """
    path = lock_path(var_dir, warehouse)
    depths: dict[Path, int] = _held.__dict__.setdefault("depths", {})
    if depths.get(path, 0):
        depths[path] += 1
        try:
            yield
        finally:
            depths[path] -= 1
        return
    with _exclusive(path, holder, wait, say, "the ledger", LedgerBusy):
        depths[path] = 1
        try:
            yield
        finally:
            depths[path] = 0


@contextmanager
def app_lock(
    var_dir: Path,
    warehouse: str,
    app: str,
    holder: str,
    *,
    wait: float = DEFAULT_WAIT,
    say: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold `app`'s lock (of the ledger under `warehouse`, its file in `var_dir`) for the
    block: the one process of this host that drives the app's queries. Waits up to `wait`
    seconds, then raises `AppBusy`."""
    path = app_lock_path(var_dir, warehouse, app)
    with _exclusive(path, holder, wait, say, f"the app {app}", AppBusy):
        yield


@contextmanager
def _exclusive(
    path: Path,
    holder: str,
    wait: float,
    say: Callable[[str], None] | None,
    what: str,
    busy: type[TimeoutError],
) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        _acquire(handle, path, wait, say, what, busy)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{holder} (pid {os.getpid()})\n")
        handle.flush()
        try:
            yield
        finally:
            handle.truncate(0)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _acquire(
    handle: IO[str],
    path: Path,
    wait: float,
    say: Callable[[str], None] | None,
    what: str,
    busy: type[TimeoutError],
) -> None:
    deadline = time.monotonic() + wait
    told = False
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            holder = _holder(path)
            if time.monotonic() >= deadline:
                raise busy(
                    f"{what} is busy: {holder} has held {path} for more than {wait:g}s; "
                    "wait for it to finish, or stop it if it hangs"
                ) from None
            if say is not None and not told:
                say(f"waiting for {holder} to release {what} ({path}) ...")
                told = True
            time.sleep(_POLL)


def _holder(path: Path) -> str:
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    return text or "another process"
