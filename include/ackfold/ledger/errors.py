"""The ledger's errors, in one module that imports nothing of ackfold but the base error
(`ackfold.errors.AckfoldError`): every module of the ledger (and the CLI, which maps them
to exit codes) imports them from here, so no circle of imports forms around an error
class.

`LedgerError` is the ledger's base error: the ledger cannot answer or cannot be written
as asked. The CLI prints its message and exits with code 1.

Example:
    >>> issubclass(NoLedger, LedgerError), issubclass(LedgerConflict, LedgerError)
    (True, True)
"""

from __future__ import annotations

from ackfold.errors import AckfoldError

__all__ = [
    "AppBusy",
    "FenceUnreadable",
    "LeaseLost",
    "LeaseTooNew",
    "LedgerBusy",
    "LedgerConflict",
    "LedgerError",
    "MissingDeltaRs",
    "NoLedger",
    "RootNotFound",
    "SchemaMismatch",
    "SparkCommitRefused",
    "Unfenced",
    "UnknownApp",
    "UnreadableFiles",
    "UnsafeSparkCommits",
    "UnsafeStore",
]


class LedgerError(AckfoldError):
    """The ledger cannot answer: missing tables, an unknown root or app. Exit code 1."""


class NoLedger(LedgerError):
    """The ledger's tables do not exist yet, or hold no roots."""


class RootNotFound(LedgerError):
    """No `root_state` row for the requested root id."""


class UnknownApp(LedgerError):
    """No root of the requested app in `root_state`."""


class LedgerConflict(LedgerError):
    """A ledger write lost to concurrent commits on every try: another writer kept
    changing the table. The message names the table, the conflict and the tries."""


class SchemaMismatch(LedgerError):
    """A ledger table exists with columns the contract's rows cannot be written to."""


class MissingDeltaRs(LedgerError):
    """This Python cannot import deltalake, which commits every ledger table on an object
    store."""


class UnsafeStore(LedgerError):
    """The store, as configured, could let two commits of one version both succeed."""


class SparkCommitRefused(LedgerError):
    """A Spark commit to a ledger table that delta-rs commits on this object store."""


class LedgerBusy(LedgerError, TimeoutError):
    """Another reconcile or replay held the ledger lock for too long. Also a
    `TimeoutError`: a wait that ran out."""


class AppBusy(LedgerError, TimeoutError):
    """Another driver of the app held its lock for too long. Also a `TimeoutError`."""


class LeaseLost(LedgerError):
    """This run no longer holds the ledger's lease (another run took it, or its renewals
    stopped for longer than its time to live): it commits nothing more."""


class FenceUnreadable(LedgerError):
    """A table the fence must read (to claim it, or to check a commit) could not be read
    for another reason than its absence: the run stops instead of going on unclaimed."""


class Unfenced(LedgerError):
    """A commit that only the holder of the ledger's lease may make, made with no turn of
    the ledger in force (invariant 19)."""


class UnsafeSparkCommits(LedgerError):
    """The Spark engine was chosen where Spark's commits to the derived tables are not
    put-if-absent, and a paused writer could overwrite a newer commit."""


class LeaseTooNew(LedgerError):
    """The ledger's lease is kept for a later ackfold release than this one."""


class UnreadableFiles(LedgerError):
    """A table's data files do not hold its rows as they are (deletion vectors, column
    mapping): the engines that read the files themselves refuse it."""


class OutputDeclarationError(LedgerError, ValueError):
    """A declared output is invalid (an empty path, an origin column that is no plain
    column name): the message names the setting or argument (`ackfold.ledger.commits.outputs`)."""
