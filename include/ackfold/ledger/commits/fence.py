"""Fencing: a run that has lost the ledger's lease cannot commit (invariant 16).

The lease (`ackfold.ledger.commits.lease`) says who may write the derived tables, but a holder
can be frozen (a paused VM, a laptop asleep) past its time to live, and wake up to
commit what it computed before another run took over. So every commit of a leased run
carries the lease's **epoch**, and Delta refuses it once a newer epoch exists:

- Each take of the lease draws the next epoch, in the same compare-and-swap commit that
  takes it: no two holders ever share one.
- Each commit of the run to a table carries a Delta application transaction (`txn`) of
  the app id `ackfold.lease`, version `epoch * STRIDE + n` (n counts the run's commits,
  so the versions only grow, as Spark's idempotent writes need).
- Before it reads a table it will write, the run **claims** it: a commit of nothing but
  that transaction. A commit of an older epoch then fails either way:
    - begun after the claim, it reads the newer epoch from the table's snapshot and is
      refused here (`LeaseLost`); Spark skips a `txnVersion` not above the table's;
    - begun before it and committed after, Delta's conflict check fails it: both
      delta-rs's and Spark's fail a commit whose transaction names an app id that a
      commit since its snapshot also set ("concurrent transaction"), and the retry
      reads the newer epoch.
- A commit of this run whose answer was lost (a store restarted mid-PUT) is found on the
  retry by its version, and not made twice.

And no gap around it (issue 55): a claim that cannot read a table (any error but its
absence) stops the run (`FenceUnreadable`); a commit with no fence in force raises
(`Unfenced`): only a leased run writes the derived tables; `Fence.check` reads the lease
before a step no commit can fence (a replay's sends).

`docs/decisions/fencing.md` has the argument, and what each engine does.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake, DeltaTable
    >>> path = tempfile.mkdtemp() + "/t"
    >>> write_deltalake(path, pa.table({"a": [1]}))
    >>> old, new = Fence(path, epoch=4), Fence(path, epoch=5)
    >>> new.claim([path])
    >>> def append(table, properties):
    ...     write_deltalake(table, pa.table({"a": [2]}), mode="append",
    ...                     commit_properties=properties)
    >>> try:
    ...     old.commit(path, append)
    ... except LeaseLost as lost:
    ...     print(str(lost).split(": ")[0].split("/")[-1])
    t holds commits of lease epoch 5 (this run's is 4)
    >>> new.commit(path, append)
    >>> sorted(DeltaTable(path).to_pyarrow_table()["a"].to_pylist())
    [1, 2]
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

from ackfold.ledger.commits.fence_tables import checkpointed, commit_nothing, table_at
from ackfold.ledger.errors import FenceUnreadable, LeaseLost, Unfenced
from ackfold.ledger.reading.sql import first_line
from ackfold.ledger.schema.tables import DEAD_LETTERS, ROOT_STATE, UNMATCHED_EVENTS
from ackfold.ledger.storage.conflicts import retry_conflicts
from ackfold.ledger.storage.run_store import Store, store_for
from ackfold.ledger.storage.snapshots import Snapshots

log = logging.getLogger("ackfold.ledger.commits.fence")

T = TypeVar("T")
FENCE_APP: Final = "ackfold.lease"
# The tables only a leased run writes: every commit to them is fenced, or refused.
DERIVED: Final = frozenset({ROOT_STATE, UNMATCHED_EVENTS, DEAD_LETTERS})
# A fenced commit's transaction version: the epoch, then the run's count of commits.
STRIDE: Final = 10**9
_active = threading.local()
# Fault injection for tests and the soak (bench/soak.py): each hook is called with the
# table's path and "before" or "after" around every fenced commit, in the committing
# thread; one that raises (a kill) or blocks (a frozen host) stands for what happens there.
# "before" comes before the fence's checks: a host frozen there checks when it wakes.
COMMIT_HOOKS: list[Callable[[str, str], None]] = []


class Fence:
    """The epoch of one hold of the ledger's lease under `warehouse`, and the commits made
    under it. `expired` says whether the lease's time to live has run out by this host's
    clock (its renewals failed): then the run stops committing at once. `newest` reads the
    lease's epoch now: a newer one (another run took the lease, even one that has committed
    nothing yet) stops it too. `store` is the run's store (resolved for `warehouse` if not
    given)."""

    def __init__(
        self,
        warehouse: str,
        *,
        epoch: int,
        holder: str = "",
        expired: Callable[[], bool] = lambda: False,
        newest: Callable[[], int] | None = None,
        store: Store | None = None,
    ) -> None:
        if epoch < 1:
            raise ValueError(f"a lease epoch is 1 or more, not {epoch}")
        self.warehouse = warehouse
        self.epoch = epoch
        self.holder = holder
        self._expired = expired
        self._newest = newest
        self._commits = itertools.count(1)
        self.lost: str | None = None
        # The tables this hold commits to, kept across its commits and refreshed before
        # each (`ackfold.ledger.storage.snapshots`): the checks read their latest version all the
        # same, without a fresh open per commit; on the run's store.
        self.store = store or store_for(warehouse)
        self._snapshots = Snapshots(store=self.store)

    def lose(self, why: str) -> None:
        """Say that the lease is lost (the keeper found another holder): no more commits."""
        self.lost = why

    # -- delta-rs ---------------------------------------------------------------------------

    def claim(self, paths: Iterable[str]) -> None:
        """Commit this epoch to each table at `paths` (a `txn` alone; none to a table not
        made yet), before the run reads them: from then on no commit of an older epoch
        lands there."""
        read = self._snapshots.table  # the thread's kept table, refreshed
        for path in paths:
            # Only a table that does not exist is passed over: any other read error (a
            # 503, a corrupt log) stops the run, which would go on unclaimed.
            found = [table_at(path, missing_ok=True, what=f"claim of {path}", read=read)]
            if found[0] is not None:  # read once: the first try commits on it
                load = lambda f=found, p=path: f.pop() if f else read(p)  # noqa: E731
                self.commit(path, commit_nothing, what=f"fence of {path}", load=load)

    def check(self, what: str, *, read: bool = True) -> None:
        """Raise `LeaseLost` unless this run still holds the lease, as far as it can tell
        now (lost, or expired by this host's clock; with `read`, taken since, by a read of
        the lease): before a step outside the ledger, such as a replay's send, which no
        Delta commit can fence. `what` names the step."""
        self._check(None, what, read=read)

    def commit(
        self,
        path: str,
        action: Callable[[Any, Any], T],
        *,
        what: str = "",
        also: Any = (),
        load: Callable[[], Any] | None = None,
    ) -> T | None:
        """Run `action(table, commit_properties)`, one delta-rs commit to the table at
        `path`, fenced: the properties carry this run's transaction (and the `txn`s of
        `also`); retried on a conflict, each time on the table's latest snapshot (`load`;
        by default this hold's table refreshed, `ackfold.ledger.storage.snapshots`) checked first.
        None, without committing, if an earlier try of this commit landed."""
        from deltalake import CommitProperties, Transaction

        version = self._next()

        def attempt() -> T | None:
            table = (load or (lambda: self._snapshots.table(path)))()
            # Read once a try: on S3 each read of a transaction reads the log (26 ms).
            read_at = table.version()
            held = table.transaction_version(FENCE_APP)
            if held == version:
                return None  # an earlier try of this commit landed
            _hooks(path, "before")
            if table.version() != read_at:
                # The table object is the thread's, kept (`ackfold.ledger.storage.snapshots`): a
                # commit through it meanwhile moved its snapshot, so what it holds now is
                # read again, or a claim made meanwhile would pass unseen.
                held = table.transaction_version(FENCE_APP)
            self._check(table, path, held=held)
            txns = [Transaction(FENCE_APP, version), *also]
            result = checkpointed(action)(table, CommitProperties(app_transactions=txns))
            _hooks(path, "after")
            return result

        return retry_conflicts(self._refusing(path, attempt), what=what or f"commit to {path}")

    # -- Spark ------------------------------------------------------------------------------

    def spark_commit(self, path: str, action: Callable[[tuple[str, int]], T], *, what: str) -> T:
        """Run `action(txn)`, one Spark commit to the table at `path` with `txn` (app id,
        version) as its `txnAppId`/`txnVersion`, fenced: checked before (delta-rs, where
        this process reads the table) and confirmed after, since Spark skips a commit
        whose version is not above the table's without an error; retried on a conflict."""
        version = self._next()

        def attempt() -> T:
            _hooks(path, "before")
            table = self._read(path, f"fenced commit to {path}")
            if table is not None:
                self._check(table, path)
            result = action((FENCE_APP, version))
            _hooks(path, "after")
            after = self._read(path, f"fenced commit to {path}")
            if after is not None:  # Spark skipped it (a newer epoch) without an error
                self._check(after, path)
            return result

        return retry_conflicts(self._refusing(path, attempt), what=what)

    # -- the checks ---------------------------------------------------------------------------

    def _read(self, path: str, what: str) -> Any:
        """The table at `path` at its latest version (this hold's, refreshed); None if there
        is none; `FenceUnreadable` if it cannot be read."""
        from deltalake.exceptions import TableNotFoundError

        try:
            return self._snapshots.table(path)
        except TableNotFoundError:
            return None
        except Exception as exc:
            raise FenceUnreadable(
                f"the {what} could not read {path} ({first_line(exc)}): the run stops "
                "rather than commit unfenced; run it again once the store answers"
            ) from exc

    def _next(self) -> int:
        return self.epoch * STRIDE + next(self._commits)

    def _check(self, table: Any, path: str, *, read: bool = True, held: int | None = None) -> None:
        """Raise `LeaseLost` if this run may not commit to `table` (None: only the lease
        is checked): the lease is lost or expired, or (`read`) taken since, or a newer
        epoch committed there. `held`: the table's fence transaction, if just read."""
        if self.lost is not None:
            raise LeaseLost(
                f"{self._who()} lost the ledger's lease ({self.lost}): {path} is left as it is"
            )
        if self._expired():
            raise LeaseLost(
                f"{self._who()} could not renew the ledger's lease within its time to live: "
                f"another run may hold it now, so nothing more is committed to {path}"
            )
        taken = self._taken_since() if read else None
        if taken is not None:
            self.lose(f"taken since, lease epoch {taken}")
            raise LeaseLost(
                f"{self._who()} lost the ledger's lease to a newer run (lease epoch {taken}): "
                f"{path} is left as it is; the next run redoes this one's work"
            )
        if held is None and table is not None:
            held = table.transaction_version(FENCE_APP)
        if held is None:
            return
        epoch = int(held) // STRIDE
        if epoch > self.epoch:
            raise LeaseLost(
                f"{path} holds commits of lease epoch {epoch} (this run's is {self.epoch}): "
                f"{self._who()} lost the ledger's lease to a newer run, which owns the "
                "derived tables now; this run's work is dropped, and the next run redoes it"
            )

    def _taken_since(self) -> int | None:
        """The lease's epoch if another run has taken it since this one did; None if not,
        or if the lease cannot be read now (the tables' epochs still fence this run)."""
        if self._newest is None:
            return None
        try:
            newest = self._newest()
        except Exception as exc:  # a store restarting: the check of the table remains
            log.debug("fence: the lease could not be read (%s)", exc)
            return None
        return newest if newest > self.epoch else None

    def _refusing(self, path: str, attempt: Callable[[], T]) -> Callable[[], T]:
        """`attempt`, whose conflicting commit is a `LeaseLost` when a newer epoch wrote
        the table meanwhile (delta-rs and Spark say "concurrent transaction")."""

        def run() -> T:
            try:
                return attempt()
            except LeaseLost:
                raise
            except Exception:
                self._snapshots.forget(path)  # read afresh after a failed commit
                table = table_at(path, missing_ok=True)
                if table is not None:
                    self._check(table, path)
                raise

        return run

    def _who(self) -> str:
        held_by = f"{self.holder}, " if self.holder else ""
        return f"this run ({held_by}lease epoch {self.epoch})"


def _hooks(path: str, moment: str) -> None:
    for hook in list(COMMIT_HOOKS):
        hook(path, moment)


def version_of(path: str) -> int | None:
    """The latest version of the table at `path`; None if there is none (any other read
    error raises `FenceUnreadable`). Under a fence of its ledger, that hold's table,
    refreshed (`ackfold.ledger.storage.snapshots`)."""
    fences: dict[str, Fence] = _active.__dict__.setdefault("fences", {})
    under = [f for key, f in fences.items() if path.startswith(f"{key}/")]
    if under:
        table = under[0]._read(path, f"read of {path}")
        return None if table is None else int(table.version())
    table = table_at(path, missing_ok=True, what=f"read of {path}")
    return None if table is None else int(table.version())


def active(warehouse: str) -> Fence | None:
    """The fence of the lease this thread holds on `warehouse`, if any."""
    fences: dict[str, Fence] = _active.__dict__.setdefault("fences", {})
    return fences.get(warehouse.rstrip("/"))


@contextmanager
def holding(fence: Fence) -> Iterator[Fence]:
    """Make `fence` this thread's fence of its warehouse for the block (`ledger_turn`)."""
    fences: dict[str, Fence] = _active.__dict__.setdefault("fences", {})
    key = fence.warehouse.rstrip("/")
    before = fences.get(key)
    fences[key] = fence
    try:
        yield fence
    finally:
        if before is None:
            fences.pop(key, None)
        else:
            fences[key] = before


def commit(
    warehouse: str,
    path: str,
    action: Callable[[Any, Any], T],
    *,
    what: str,
    also: Any = (),
    load: Callable[[], Any] | None = None,
) -> T | None:
    """`action(table, commit_properties)`: one delta-rs commit to the table at `path` of
    the ledger under `warehouse`, fenced by this thread's lease (`Fence.commit`). Raises
    `Unfenced` outside a turn: a write that only the lease's holder may make (invariant
    19). `load` reads the table afresh for each try (by default with the environment's
    storage options)."""
    return held(warehouse, what).commit(path, action, what=what, also=also, load=load)


def spark_commit(
    warehouse: str, path: str, action: Callable[[tuple[str, int] | None], T], *, what: str
) -> T:
    """`action(txn)`: one Spark commit to the table at `path` of the ledger under
    `warehouse`, with `txn` as its `txnAppId`/`txnVersion`, fenced by this thread's lease
    (`Fence.spark_commit`). Raises `Unfenced` outside a turn."""
    return held(warehouse, what).spark_commit(path, action, what=what)


def held(warehouse: str, what: str) -> Fence:
    """This thread's fence of `warehouse`; `Unfenced` if it holds none (`what`, a commit or
    another step that only the lease's holder may take, says what was refused)."""
    fence = active(warehouse)
    if fence is None:
        raise Unfenced(
            f"{what}: only the holder of the ledger's lease may do this, and "
            "this thread holds no turn of the ledger under "
            f"{warehouse}; run it inside `ackfold.ledger.commits.lease.ledger_turn` (as the "
            "reconcile, replay and maintenance runs do)"
        )
    return fence
