"""The lease's record: the keys its table's properties hold (holder, token, expiry,
process, epoch), the format they are kept in and the gate that keeps an earlier release
out, and the epoch a lease made anew goes on from (`ackfold.ledger.commits.lease` takes,
renews and gives it back).

- **Epochs never go back**: a lease table made anew (first use, or lost) starts from the
  highest epoch a commit to the ledger's tables carries (`epoch_floor`).
- **Releases**: the lease records its format and the first release that keeps it
  (`LEASE_FORMAT`, `MIN_RELEASE`). A release of an earlier format is kept out: the keys
  it reads (format 1's) say the lease is held for ever by "ackfold 0.2.0 or later", so it
  waits, names that release and gives up (`LedgerBusy`); a lease of a later format is
  refused with `LeaseTooNew`, naming that format's release.
"""

from __future__ import annotations

from typing import Final

from ackfold.ledger.errors import LeaseTooNew, LedgerError

# Who holds it, with which token, until when, in which process (host:pid). Kept under keys
# of their own since lease format 2: the earlier keys (`OLD_KEYS`) keep an earlier release out.
HOLDER, TOKEN, EXPIRES = "ackfold.turn.holder", "ackfold.turn.token", "ackfold.turn.expires"
PROCESS = "ackfold.turn.process"
GENERATION = "ackfold.lease.epoch"  # how many times it was taken: the fence's epoch
# The lease's format, and the first release that keeps it: a release that knows only an
# earlier format refuses the lease, naming that release (`LeaseTooNew`). Raise both when
# a release changes what a holder must do; `ackfold.ledger.commits.fence` came with format 2.
FORMAT, RELEASE = "ackfold.lease.format", "ackfold.lease.minRelease"
LEASE_FORMAT: Final = 2
MIN_RELEASE: Final = "0.2.0"
# The keys of format 1 (ackfold before 0.2.0), which such a release reads and never finds
# free: held, by a holder whose name says what to do, for ever. So an older host waits for
# it, says for whom, and gives up (`LedgerBusy`) without taking the lease or committing.
OLD_KEYS: Final = ("ackfold.lease.holder", "ackfold.lease.token", "ackfold.lease.expires",
                   "ackfold.lease.process")  # fmt: skip
GATE: Final = dict(
    zip(
        OLD_KEYS,
        (
            f"ackfold {MIN_RELEASE} or later (this host runs an older ackfold: upgrade it "
            "before it runs a reconcile, replay or maintenance)",
            f"lease-format-{LEASE_FORMAT}",
            "9999-12-31T23:59:59+00:00",
            "-",
        ),
        strict=True,
    )
)
FREE: Final = "-"
NEVER: Final = "1970-01-01T00:00:00+00:00"
PROPERTIES: Final = {
    HOLDER: FREE,
    TOKEN: FREE,
    EXPIRES: NEVER,
    PROCESS: FREE,
    GENERATION: "0",
    FORMAT: str(LEASE_FORMAT),
    RELEASE: MIN_RELEASE,
    **GATE,
    # One small commit per renewal: checkpoint often, keep an hour of log.
    "delta.checkpointInterval": "50",
    "delta.logRetentionDuration": "interval 1 hours",
}


def view(configuration: dict[str, str], path: str) -> dict[str, str]:
    """The properties of the lease at `path` as this release reads them. A lease kept in a
    later format is refused; one an earlier release left (format 1: no keys of this one) is
    read from that release's keys, so its live holder is waited for."""
    found = int(configuration.get(FORMAT, "1"))
    if found > LEASE_FORMAT:
        from ackfold.version import __version__

        raise LeaseTooNew(
            f"the ledger's lease ({path}) is kept by ackfold "
            f"{configuration.get(RELEASE, '?')} or later (lease format {found}); this "
            f"host runs ackfold {__version__}, which knows format {LEASE_FORMAT}: upgrade "
            "ackfold on this host before it runs a reconcile, replay or maintenance"
        )
    seen = {k: PROPERTIES[k] for k in (HOLDER, TOKEN, EXPIRES, PROCESS, GENERATION)}
    if TOKEN not in configuration:  # an earlier release's lease: its keys say who has it
        for key, old in zip((HOLDER, TOKEN, EXPIRES, PROCESS), OLD_KEYS, strict=True):
            seen[key] = configuration.get(old, seen[key])
    return {**seen, **configuration}


def epoch_floor(warehouse: str, storage_options: dict[str, str] | None = None) -> int:
    """The highest lease epoch that a commit to a table of the ledger under `warehouse`
    carries (0 if none): where a lease made anew must go on from. A table that cannot be
    read (but is there) stops it, as a fence would."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from ackfold.ledger.commits.fence import FENCE_APP, STRIDE
    from ackfold.ledger.schema.tables import TABLES, Ledger
    from ackfold.ledger.storage.store import delta_uri

    ledger, floor = Ledger(warehouse), 0
    for name in TABLES:
        try:
            table = DeltaTable(delta_uri(ledger.path(name)), storage_options=storage_options)
        except TableNotFoundError:
            continue
        except Exception as exc:
            raise LedgerError(
                f"the ledger lease is missing and {ledger.path(name)} cannot be read ({exc}): "
                "its epoch floor is unknown, so no lease is made; run again once the store "
                "answers"
            ) from exc
        held = table.transaction_version(FENCE_APP)
        if held is not None:
            floor = max(floor, int(held) // STRIDE)
    return floor
