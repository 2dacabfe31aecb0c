"""Retracting a dead letter's effects: `run_retract`, what `ackfold retract`, the root
page's button (UI) and the `ackfold_manual_retract` DAG call.

A dead letter's message ran out of attempts, but what its tree wrote before it failed is
still in the outputs. A retract deletes those rows: the rows of its origin root, in each
declared output of its app (`ackfold.effects.outputs`). In this order:

- **select** the roots as `ackfold replay` selects them (ids, app, time range, limit),
  among dead letters only (`root_state` status `dead_lettered`); and **refuse** any that
  is not one, whose message a later attempt completed, or that a replay is bringing back
  (a replay planned or sent, a newer attempt registered): their rows are not a dead
  letter's to take. Roots named by id are refused as a whole (`RetractRefused`, nothing
  deleted); a selection by app and time skips them and says why (`RetractPlan.skipped`);
- **find** each root's rows per output (`ackfold.effects.find`): shown first
  (`on_plan`). A dry run, the default, stops here: it reads only, and needs no turn;
- under the ledger's turn (`ledger_turn`: the lock, then the lease, every check and read
  above made again under it), **log ahead** to `retract_log`: a `planned` row per root
  and output, committed before anything is deleted;
- **delete**: ONE Delta commit per output table (a MERGE on the origin column against the
  Arrow table of the origins: no value is SQL text), fenced by the lease like every
  derived write (a run that lost it deletes nothing);
- **log after**: a `deleted` row per root and output with the commit's version, or a
  `failed` row with the error. A `planned` row with neither is what a crash left: the
  retract may be run again (it deletes what is left, by origin).

A root replayed after a retract starts clean: nothing of its origin is left in the
outputs, and its new attempt writes its rows anew.

Example:
    >>> request = RetractRequest(root_ids=(42,), dry_run=False)
    >>> run_retract(settings, request).deleted                 # doctest: +SKIP
    {'/warehouse/words': 7, '/warehouse/counts': 7}
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ackfold.effects.find import RootEffects
from ackfold.ledger.lock import DEFAULT_WAIT
from ackfold.ledger.parse import parse_limit
from ackfold.replay.request import whoami

if TYPE_CHECKING:
    from ackfold.config import Settings


@dataclass(frozen=True)
class RetractRequest:
    """Which dead letters to retract. Filters combine with AND: `root_ids`, `app`, the
    status changed (dead-lettered) in [`since`, `until`), at most `limit` roots, oldest
    first. `dry_run` (the default) shows what would go and deletes nothing."""

    root_ids: tuple[int, ...] = ()
    app: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None
    dry_run: bool = True
    requested_by: str = field(default_factory=whoami)

    def __post_init__(self) -> None:
        if self.since and self.until and self.since >= self.until:
            raise ValueError(f"--since ({self.since}) must be before --until ({self.until})")
        if self.limit is not None:
            parse_limit(self.limit)

    def describe(self) -> str:
        """The request as JSON, for the retract log's `request` column."""
        described = {k: v for k, v in asdict(self).items() if v not in (None, (), False)}
        described.pop("requested_by", None)
        described["dry_run"] = self.dry_run
        return json.dumps(described, default=str, sort_keys=True)


@dataclass(frozen=True)
class RetractPlan:
    """What a retract would delete: `roots`, each dead letter with its rows per output;
    `skipped`, the selected roots it leaves, counted by why; `selected`, how many the
    request matched."""

    retract_id: str
    request: RetractRequest
    selected: int
    roots: tuple[RootEffects, ...]
    skipped: dict[str, int] = field(default_factory=dict)

    def per_output(self) -> dict[str, int]:
        """Rows to delete per output table (its location), over all the plan's roots."""
        totals: dict[str, int] = {}
        for root in self.roots:
            for o in root.outputs:
                if o.problem is None:
                    totals[o.output.output] = totals.get(o.output.output, 0) + o.rows
        return totals

    @property
    def problems(self) -> dict[str, str]:
        """Per output that cannot be read, why (nothing is deleted there)."""
        found: dict[str, str] = {}
        for root in self.roots:
            found.update(root.problems)
        return found

    @property
    def with_effects(self) -> tuple[RootEffects, ...]:
        """The roots that have rows to delete."""
        return tuple(r for r in self.roots if r.has_effects)


@dataclass(frozen=True)
class RetractSummary:
    """The outcome of `run_retract`: the plan, and what was deleted per output (rows of
    the one commit to each table; empty for a dry run), and per output that could not be
    deleted from, why."""

    plan: RetractPlan
    deleted: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def dry_run(self) -> bool:
        return self.plan.request.dry_run

    @property
    def retract_id(self) -> str:
        return self.plan.retract_id

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (`ackfold retract --json`, the DAG's return value, the UI)."""
        plan = self.plan
        return {
            "retract_id": None if self.dry_run else plan.retract_id,
            "dry_run": self.dry_run,
            "requested_by": plan.request.requested_by,
            "selected": plan.selected,
            "roots": [r.as_dict() for r in plan.roots],
            "to_delete": plan.per_output(),
            "deleted": dict(self.deleted),
            "failed": dict(self.failed),
            "skipped": dict(plan.skipped),
            "problems": plan.problems,
        }


def plan_retract(settings: Settings, request: RetractRequest, *, sample: int = 3) -> RetractPlan:
    """Select, check and find; reads only (no turn): what `run_retract` would delete now.
    Raises `UnknownRoots` for root ids `root_state` does not know, `RetractRefused` for
    root ids it may not retract."""
    raise NotImplementedError


def run_retract(
    settings: Settings,
    request: RetractRequest,
    *,
    on_plan: Callable[[RetractPlan], None] | None = None,
    wait: float = DEFAULT_WAIT,
    say: Callable[[str], None] | None = None,
    holder: str | None = None,
    sample: int = 3,
) -> RetractSummary:
    """One retract run (see the module's docs): plan, show (`on_plan`; raising there ends
    the run with nothing deleted), then, unless a dry run, log ahead, delete one commit per
    output table and log after, all under the ledger's turn (waiting at most `wait`
    seconds: `LedgerBusy`). Raises `UnknownRoots`, `RetractRefused`, or `LeaseLost` (a
    run that lost the lease deletes nothing more)."""
    raise NotImplementedError
