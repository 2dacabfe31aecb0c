"""The ledger lease: one reconcile, replay or maintenance run at a time on any number of
hosts, kept in the warehouse itself (a Delta table, `<warehouse>/_ledger_lease`).

A Delta commit is atomic: version N+1 of a table is written by exactly one writer. The
lease is the metadata of a data-less table (its holder, a random token, an expiry), and
every change of it is one metadata-only commit by delta-rs that must land at exactly the
version after the one it read (`max_commit_retries=0`). So "the lease is free, take it"
is a compare-and-swap: of two hosts that both read it free, one commit lands and the
other fails, re-reads, and finds it held.

- **Take**: if the lease is free or expired (or already ours), commit ourselves as its
  holder until now + `TTL`, with the next **epoch**. Otherwise wait, saying once for
  whom, up to `wait` seconds, then `LedgerBusy` naming the holder.
- **Keep**: a daemon thread renews the expiry every `TTL / 4` while the run goes on.
- **Give back**: commit it free, if it is still ours.
- A holder that dies stops renewing, and the lease is free `TTL` after its last renewal;
  at once for a run on the holder's own host, which sees that its process is gone.
  Expiry compares the holders' clocks: hosts must keep them in sync (NTP), far inside `TTL`.
- **Fence**: a holder frozen past its expiry (a paused VM) may wake up after another run
  took over. The epoch fences it out: every commit of a leased run carries it, and a
  commit of an older epoch is refused (`ackfold.ledger.commits.fence`). The holder also stops
  committing by itself once its own clock passes its last expiry, or its keeper finds
  another holder.

- **Epochs never go back**, and **an earlier release is kept out**: the lease's record
  (its keys, format and gate, and the epoch floor) is `ackfold.ledger.commits.lease_record`.

It needs no JVM, so the CLI takes it before it starts Spark. On S3 the compare-and-swap
is delta-rs's conditional create of the next log file (`If-None-Match: *`), as for every
ledger commit there (`docs/decisions/object-stores.md`).

Example:
    >>> import tempfile
    >>> lease = LedgerLease(tempfile.mkdtemp())
    >>> with lease.held("doctest") as fence:
    ...     lease.holder().startswith("doctest on "), fence.epoch
    (True, 1)
    >>> lease.holder() is None
    True
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ackfold.ledger.commits.fence import Fence, holding
from ackfold.ledger.commits.lease_record import (
    EXPIRES,
    FORMAT,
    FREE,
    GATE,
    GENERATION,
    HOLDER,
    LEASE_FORMAT,
    MIN_RELEASE,
    NEVER,
    PROCESS,
    PROPERTIES,
    RELEASE,
    TOKEN,
    epoch_floor,
    view,
)
from ackfold.ledger.commits.lock import DEFAULT_WAIT, ledger_lock
from ackfold.ledger.errors import LedgerBusy, LedgerError
from ackfold.ledger.schema.tables import LEASE
from ackfold.ledger.storage.run_store import Store, store_for
from ackfold.ledger.storage.snapshots import Snapshots

if TYPE_CHECKING:
    from ackfold.config import Settings

log = logging.getLogger("ackfold.ledger.commits.lease")

TABLE: Final = LEASE
TTL: Final = timedelta(minutes=2)
_POLL: Final = 1.0
_turns = threading.local()


@contextmanager
def ledger_turn(
    settings: Settings,
    holder: str,
    *,
    wait: float = DEFAULT_WAIT,
    say: Callable[[str], None] | None = None,
    clock: Callable[[], datetime] | None = None,
    store: Store | None = None,
) -> Iterator[Fence]:
    """The turn of a reconcile, replay or maintenance run: this host's lock file
    (`ledger_lock`: instant, and freed at once if the holder dies), then the ledger's lease
    (every host), whose fence it yields and makes this thread's (`ackfold.ledger.commits.fence.
    active`): the run's commits carry its epoch. Re-entrant within a thread: a replay
    holding its turn from the plan on runs the sends inside it. `clock` is the lease's
    (this host's clock by default); `store` is the run's store, which the lease and the
    fence use (resolved here from the settings if not given)."""
    started = time.monotonic()
    with ledger_lock(settings.var_dir, settings.table_root, holder, wait=wait, say=say):
        # Re-entrant per warehouse: a turn of another ledger takes that ledger's lease.
        depths: dict[str, int] = _turns.__dict__.setdefault("depths", {})
        key = settings.table_root
        if depths.get(key, 0):
            depths[key] += 1
            try:
                yield _turns.__dict__["fences"][key]
            finally:
                depths[key] -= 1
            return
        left = max(0.0, wait - (time.monotonic() - started))
        lease = LedgerLease(settings.table_root, clock=clock, store=store)
        with lease.held(holder, wait=left, say=say) as fence, holding(fence):
            depths[key] = 1
            _turns.__dict__.setdefault("fences", {})[key] = fence
            try:
                yield fence
            finally:
                depths[key] = 0


class LedgerLease:
    """The lease of the ledger under `warehouse` (`Settings.table_root`), on `store` (the
    run's; else one resolved for `warehouse`, with `storage_options` if given, as
    LedgerWriter's)."""

    def __init__(
        self,
        warehouse: str,
        *,
        ttl: timedelta = TTL,
        storage_options: dict[str, str] | None = None,
        clock: Callable[[], datetime] | None = None,
        host: str | None = None,
        store: Store | None = None,
    ) -> None:
        from ackfold.ledger.storage.store import delta_uri

        self.warehouse = warehouse
        self.path = delta_uri(f"{warehouse.rstrip('/')}/{TABLE}")
        self.ttl = ttl
        if store is None:  # the run's store, if the warehouse is its (`store_for`)
            found = store_for(warehouse) if storage_options is None else None
            store = found or Store.at(warehouse, options=storage_options)
        self.store = store
        self.storage_options = self.store.storage_options
        self._clock = clock or (lambda: datetime.now(UTC))
        self.host = host or socket.gethostname()
        # The expiry of this host's last take or renewal: past it, its hold may be taken.
        self._until = datetime.fromisoformat(NEVER)
        # The lease table that the fence reads before each commit, kept and refreshed.
        self._snapshots = Snapshots(store=self.store)

    def holder(self) -> str | None:
        """Who holds the lease now (None: nobody, or an expired holder)."""
        config = self._read()[1]
        return None if self._free(config) else config[HOLDER]

    @contextmanager
    def held(
        self,
        holder: str,
        *,
        wait: float = DEFAULT_WAIT,
        say: Callable[[str], None] | None = None,
    ) -> Iterator[Fence]:
        """Hold the lease for the block: `holder` names this run to those who wait. Yields
        the fence of this hold: its epoch, which the run's commits carry."""
        me = f"{holder} on {self.host} (pid {os.getpid()})"
        token = uuid.uuid4().hex
        epoch = self._take(me, token, wait, say)
        fence = Fence(
            self.warehouse,
            epoch=epoch,
            holder=me,
            expired=lambda: self._clock() >= self._until,
            newest=self._newest,
            store=self.store,
        )
        stop = threading.Event()
        keeper = threading.Thread(
            target=self._keep, args=(me, token, stop, fence), name="ackfold-lease", daemon=True
        )
        keeper.start()
        try:
            yield fence
        finally:
            stop.set()
            keeper.join(timeout=60)
            try:
                self._give_back(token)
            except Exception as exc:  # never hide the block's own error behind this one
                log.warning("could not give back the ledger lease (%s): it expires by itself", exc)

    # -- the three moves ----------------------------------------------------------------

    def _take(self, me: str, token: str, wait: float, say: Callable[[str], None] | None) -> int:
        """Take the lease for `me` (waiting up to `wait` seconds); its new epoch."""
        deadline = time.monotonic() + wait
        told = False
        while True:
            table, config = self._read()
            if self._free(config) or config[TOKEN] == token:
                epoch = int(config[GENERATION]) + 1
                if self._swap(table, me, token, epoch=epoch):
                    log.info("took the ledger lease (epoch %d): %s", epoch, me)
                    self._snapshots.keep(self.path, table)  # the fence's first read
                    return epoch
                if time.monotonic() < deadline:
                    continue  # another host committed first: look again at once
                raise LedgerBusy(
                    f"the ledger is busy: every try to take its lease ({self.path}) within "
                    f"{wait:g}s lost to another run's commit"
                )
            other = f"{config[HOLDER]} (until {config[EXPIRES]})"
            if time.monotonic() >= deadline:
                raise LedgerBusy(
                    f"the ledger is busy: {other} has held its lease ({self.path}) for more "
                    f"than {wait:g}s; wait for it to finish, or stop it if it hangs (the "
                    f"lease frees itself {self.ttl.total_seconds():g}s after its holder dies)"
                )
            if say is not None and not told:
                say(f"waiting for {other} to release the ledger lease ({self.path}) ...")
                told = True
            time.sleep(_POLL)

    def _keep(self, me: str, token: str, stop: threading.Event, fence: Fence) -> None:
        while not stop.wait(self.ttl.total_seconds() / 4):
            try:
                table, config = self._read()
                if config[TOKEN] != token:
                    fence.lose(f"taken by {config[HOLDER]}")
                    log.error(
                        "lost the ledger lease to %s (were renewals blocked for %ss?): this "
                        "run commits nothing more, its fence refuses it",
                        config[HOLDER], self.ttl.total_seconds(),
                    )  # fmt: skip
                    return
                self._swap(table, me, token, epoch=fence.epoch)
            except Exception as exc:  # the next renewal may get through: say so and go on
                log.warning("could not renew the ledger lease (%s): %s", self.path, exc)

    def _give_back(self, token: str) -> None:
        for _ in range(5):
            table, config = self._read()
            if config[TOKEN] != token:
                return
            epoch = int(config[GENERATION])
            if self._swap(table, FREE, FREE, epoch=epoch, expires=NEVER, process=FREE):
                return
        log.warning("could not give back the ledger lease: it expires by itself")

    # -- Delta ---------------------------------------------------------------------------

    def _free(self, config: dict[str, str]) -> bool:
        expires = datetime.fromisoformat(config.get(EXPIRES, NEVER))
        if config.get(TOKEN, FREE) == FREE or expires <= self._clock():
            return True
        return self._gone(config.get(PROCESS, FREE))

    def _gone(self, process: str) -> bool:
        """Whether `process` (host:pid) ran on this host and is no longer alive."""
        host, _, pid = process.rpartition(":")
        if host != self.host or not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            return False
        return False

    def _swap(
        self,
        table: Any,
        holder: str,
        token: str,
        *,
        epoch: int,
        expires: str | None = None,
        process: str | None = None,
    ) -> bool:
        """Commit the lease's new value at the version after `table`'s; False if another
        commit got there first."""
        from deltalake import CommitProperties
        from deltalake.exceptions import CommitFailedError

        until = expires or (self._clock() + self.ttl).isoformat()
        try:
            table.alter.set_table_properties(
                {
                    HOLDER: holder,
                    TOKEN: token,
                    EXPIRES: until,
                    PROCESS: process or f"{self.host}:{os.getpid()}",
                    GENERATION: str(epoch),
                    FORMAT: str(LEASE_FORMAT),
                    RELEASE: MIN_RELEASE,
                    **GATE,
                },
                raise_if_not_exists=False,
                commit_properties=CommitProperties(max_commit_retries=0),
            )
        except CommitFailedError:
            return False
        if expires is None:
            self._until = datetime.fromisoformat(until)
        return True

    def _newest(self) -> int:
        """The lease's epoch now, for the fence's check before each commit: the lease table
        kept and refreshed (`update_incremental` reads every commit since, so a take by
        another host is seen), not opened again. It raises rather than make a missing
        lease (the fence then goes by the tables' epochs); the takes, renewals and
        give-backs read it afresh (`_read`)."""
        table = self._snapshots.table(self.path)
        return int(view(table.metadata().configuration, self.path)[GENERATION])

    def _read(self) -> tuple[Any, dict[str, str]]:
        """The lease table (made if missing) and its properties, as this release reads
        them; `LeaseTooNew` if a later release keeps it."""
        from deltalake import DeltaTable, Field, Schema
        from deltalake.exceptions import DeltaError, TableNotFoundError
        from deltalake.schema import PrimitiveType

        self.store.require_conditional_writes()  # once per store
        for _ in range(3):
            try:
                table = DeltaTable(self.path, storage_options=self.storage_options)
                return table, view(table.metadata().configuration, self.path)
            except TableNotFoundError:
                pass
            # Made anew (first use, or lost): its epochs go on from the highest fence the
            # ledger's tables hold, or every run after would be refused by its own fence.
            floor = epoch_floor(self.warehouse, self.storage_options)
            if floor:
                log.warning(
                    "the ledger lease (%s) was missing: made anew, its epochs going on "
                    "from %d, the highest the ledger's tables hold", self.path, floor,
                )  # fmt: skip
            try:
                DeltaTable.create(
                    self.path,
                    Schema([Field("unused", PrimitiveType("string"))]),
                    mode="error",
                    description="ackfold: who may write the ledger now (in the properties)",
                    configuration={**PROPERTIES, GENERATION: str(floor)},
                    storage_options=self.storage_options,
                    raise_if_key_not_exists=False,
                )
            except DeltaError as exc:
                log.debug("another writer created %s first: %s", self.path, exc)
        raise LedgerError(f"cannot create or read the ledger lease at {self.path}")
