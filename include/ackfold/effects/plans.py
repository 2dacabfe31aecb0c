"""What a retract is asked (`RetractRequest`), what it would delete (`RetractPlan`) and what
it did (`RetractSummary`): the records `ackfold.effects.retract` passes around, and the
retract log (`ackfold.effects.audit`) writes."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from ackfold.effects.find import RootEffects
from ackfold.ledger.reading.parse import parse_limit
from ackfold.ledger.schema.values import whoami


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
        """Rows to delete per output table (its location), over all the plan's roots: not
        those of an output a stage reads (`kept`)."""
        totals: dict[str, int] = {}
        for root in self.roots:
            for o in root.outputs:
                if o.problem is None and not o.read_by_stage:
                    totals[o.output.output] = totals.get(o.output.output, 0) + o.rows
        return totals

    @property
    def kept(self) -> dict[str, str]:
        """Per output with rows of the plan's roots that a retract leaves, why: a stage
        reads it as a Delta stream (it carries `_ackfold`), and a stream stops at a commit
        that removes rows. Its rows were read already, or never will be."""
        return {
            o.output.output: (
                "a stage reads it (it carries _ackfold): a delete would stop the streaming "
                "query that reads it; its rows are left, and counted here only"
            )
            for root in self.roots
            for o in root.outputs
            if o.rows and o.read_by_stage and o.problem is None
        }

    @property
    def problems(self) -> dict[str, str]:
        """Per output that cannot be read, why (nothing is deleted there)."""
        found: dict[str, str] = {}
        for root in self.roots:
            found.update(root.problems)
        return found

    @property
    def with_effects(self) -> tuple[RootEffects, ...]:
        """The roots that have rows to delete (in an output no stage reads)."""
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
            "kept": plan.kept,
        }
