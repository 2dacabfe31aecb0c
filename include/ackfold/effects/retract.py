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
  derived write (a run that lost it deletes nothing). Not from an output a stage reads
  (it carries the tuple column `_ackfold`): a Delta stream stops at a commit that removes
  rows, so its rows are counted and left (`RetractPlan.kept`);
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
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ackfold.effects.errors import OutputUnreadable, RetractRefused
from ackfold.effects.outputs import DeclaredOutput
from ackfold.effects.plans import RetractPlan, RetractRequest, RetractSummary
from ackfold.effects.roots import RootRef
from ackfold.ledger.commits.lock import DEFAULT_WAIT

if TYPE_CHECKING:
    from ackfold.config import Settings

log = logging.getLogger("ackfold.effects")


def plan_retract(settings: Settings, request: RetractRequest, *, sample: int = 3) -> RetractPlan:
    """Select, check and find; reads only (no turn): what `run_retract` would delete now.
    Raises `UnknownRoots` for root ids `root_state` does not know, `RetractRefused` for
    root ids it may not retract."""
    from ackfold.effects.find import find_effects
    from ackfold.effects.roots import dead_letters, refusals, roots_by_id

    if request.root_ids:
        # The other filters combine with the ids (AND), as a replay's do.
        chosen = [
            r
            for r in roots_by_id(settings, request.root_ids)
            if (request.app is None or r.app == request.app) and _within(r, request)
        ][: request.limit or None]
    else:
        chosen = dead_letters(
            settings,
            app=request.app,
            since=request.since,
            until=request.until,
            limit=request.limit,
        )
    refused = refusals(settings, chosen)
    if request.root_ids and refused:
        raise RetractRefused({root_id: r.why for root_id, r in refused.items()})
    skipped: dict[str, int] = {}
    for refusal in refused.values():
        skipped[refusal.kind] = skipped.get(refusal.kind, 0) + 1
    allowed = [r for r in chosen if r.root_id not in refused]
    found = find_effects(settings, allowed, sample=sample)
    return RetractPlan(str(uuid.uuid4()), request, len(chosen), tuple(found), skipped)


def _within(root: RootRef, request: RetractRequest) -> bool:
    """Whether `root`'s status changed within the request's [since, until)."""
    at = root.status_changed_at
    if at is None:
        return request.since is None and request.until is None
    return (request.since is None or at >= request.since) and (
        request.until is None or at < request.until
    )


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
    from ackfold.ledger.commits.lease import ledger_turn
    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.ledger.schema.tables import REPLAY_LOG, RETRACT_LOG, ROOT_STATE, Ledger

    if request.dry_run:
        plan = plan_retract(settings, request, sample=sample)
        if on_plan is not None:
            on_plan(plan)
        return RetractSummary(plan)
    holder = holder or f"a retract by {request.requested_by}"
    with ledger_turn(settings, holder, wait=wait, say=say or log.info) as fence:
        ledger = Ledger(settings.table_root)
        LedgerWriter(settings.table_root).create([RETRACT_LOG])
        # From here no run that lost the lease commits to what this one reads: a replay
        # that would bring a root back, or a reconcile that would settle it.
        fence.claim([ledger.path(name) for name in (ROOT_STATE, REPLAY_LOG, RETRACT_LOG)])
        plan = plan_retract(settings, request, sample=max(sample, LOGGED_SAMPLE))
        if on_plan is not None:
            on_plan(plan)
        summary = _execute(settings, plan)
    log.info("retract %s: %s", plan.retract_id, json.dumps(summary.as_dict()["deleted"]))
    return summary


# Rows of each dead letter and output written into the log's `sample`, at most.
LOGGED_SAMPLE = 20


def _execute(settings: Settings, plan: RetractPlan) -> RetractSummary:
    """Log ahead, delete (one fenced commit per output), log after."""
    from ackfold.effects.audit import DELETED, FAILED, PLANNED, log_rows, plan_rows
    from ackfold.ledger.errors import LeaseLost
    from ackfold.ledger.reading.sql import first_line

    targets = {
        o.output.output: o.output
        for root in plan.roots
        for o in root.outputs
        if o.rows and not o.read_by_stage
    }
    if not targets:
        return RetractSummary(plan)
    log_rows(settings, plan_rows(plan, PLANNED, targets))  # written ahead: before any delete
    deleted: dict[str, int] = {}
    failed: dict[str, str] = {}
    for path, output in sorted(targets.items()):
        origins = sorted(
            {r.root.origin_root_id for r in plan.roots for o in r.outputs
             if o.output.output == path and o.rows}
        )  # fmt: skip
        try:
            refuse_unsafe_store(settings, output)
            version, count = delete_origins(settings, output, origins)
        except LeaseLost:
            raise  # nothing more is this run's to write, not even its log
        except Exception as exc:
            failed[path] = first_line(exc)
            log_rows(settings, plan_rows(plan, FAILED, {path: output}, error=failed[path]))
            continue
        deleted[path] = count
        log_rows(settings, plan_rows(plan, DELETED, {path: output}, version=version, total=count))
    return RetractSummary(plan, deleted, failed)


def refuse_unsafe_store(settings: Settings, output: DeclaredOutput) -> None:
    """Raise `OutputUnreadable` if the app's Spark commits to `output` are not put-if-absent
    on its store (S3 with Delta's default log store, a shared file system): a retract's
    delta-rs commit beside them could lose one of the two, the app's rows or the delete.

    Example:
        >>> from ackfold.config import load_settings
        >>> out = DeclaredOutput("orders", "s3a://lake/orders")
        >>> refuse_unsafe_store(load_settings(warehouse="/tmp/w"), out)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ackfold.effects.errors.OutputUnreadable: not retracted from s3a://lake/orders: ...
    """
    from ackfold.ledger.storage.protocol import unsafe_spark_commits

    why = unsafe_spark_commits(output.output, settings.spark.conf)
    if why is not None:
        raise OutputUnreadable(
            f"not retracted from {output.output}: the app's Spark commits there are not "
            f"put-if-absent ({why}), so a delete beside them could lose a commit; give Spark "
            "Delta's S3DynamoDBLogStore (spark.conf: spark.delta.logStore.s3a.impl), as the "
            "ledger's own tables need"
        )


def delete_origins(
    settings: Settings, output: DeclaredOutput, origins: list[int]
) -> tuple[int, int]:
    """Delete the rows of `origins` from `output`: ONE Delta commit (a MERGE of the
    origins as an Arrow table, `WHEN MATCHED THEN DELETE`), fenced by this thread's lease
    (`ackfold.ledger.commits.fence.commit`; `Unfenced` outside a turn). Returns the commit's
    version and how many rows it deleted."""
    import pyarrow as pa

    from ackfold.effects.find import open_output
    from ackfold.ledger.commits.fence import commit

    open_output(output)  # a missing table or origin column says so in words first
    source = pa.table({"origin": pa.array(origins, pa.int64())})
    # The column name is a checked plain name (`check_declaration`) and in the schema.
    predicate = f't."{output.origin_column}" = s.origin'

    def merge(table: Any, properties: Any) -> tuple[int, int]:
        metrics = (
            table.merge(
                source,
                predicate,
                source_alias="s",
                target_alias="t",
                commit_properties=properties,
            )
            .when_matched_delete()
            .execute()
        )
        return int(table.version()), int(metrics["num_target_rows_deleted"])

    done = commit(
        settings.table_root,
        output.output,
        merge,
        what=f"delete of {len(origins)} dead letter(s)' rows from {output.output}",
        load=lambda: open_output(output),
    )
    if done is None:  # an earlier try of this very commit landed: its answer was lost
        return int(open_output(output).version()), 0
    return done
