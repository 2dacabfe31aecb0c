"""`ackfold retract`: delete a dead letter's partial effects from its app's declared
outputs (a dry run unless `--yes`), and `ackfold outputs`: list or declare those outputs.

`ackfold show ROOT` lists a root's effects too (`ackfold.cli.read`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ackfold.cli.common import (
    AddCommand,
    UsageError,
    add_selection,
    add_wait,
    check_app,
    emit,
    ledger_error,
    parse_selection,
    say_on_stderr,
)

if TYPE_CHECKING:
    from ackfold.config import Settings


def add_commands(command: AddCommand) -> None:
    """Register `ackfold retract` and `ackfold outputs`, with their arguments."""
    retract = command(
        "retract",
        _retract,
        "delete dead letters' partial effects from their app's declared outputs, by origin "
        "(a dry run unless --yes)",
    )
    add_selection(retract, "dead letters")
    retract.add_argument(
        "--dry-run", action="store_true", help="show what would be deleted (the default)"
    )
    retract.add_argument(
        "--yes", action="store_true", help="delete: without it, only show what would go"
    )
    retract.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_wait(retract)
    # Exit 0 when it deleted or would delete rows; 1 when there is none to delete, a root
    # or app is unknown, a root is refused or a delete failed; 2 for bad arguments.
    outputs = command("outputs", _outputs, "list the declared outputs of each app, or declare one")
    outputs.add_argument("--app", metavar="APP", help="only this app's (with --declare: required)")
    outputs.add_argument(
        "--declare", metavar="TABLE", help="declare the output table at TABLE (a path or URI)"
    )
    outputs.add_argument(
        "--origin-column",
        metavar="COLUMN",
        default="origin_root_id",
        help="with --declare: the column holding each row's origin root id "
        "(default origin_root_id)",
    )
    outputs.add_argument(
        "--clean",
        action="store_true",
        help="with --declare: no dead letter may have rows there (a quality expectation)",
    )
    outputs.add_argument("--json", action="store_true", help="print JSON")


def _retract(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.effects import EffectsError, RetractPlan, RetractRequest, run_retract
    from ackfold.ledger.errors import LedgerError
    from ackfold.ledger.reading.reader import LedgerReader

    if args.yes and args.dry_run:
        raise UsageError("--yes deletes, --dry-run does not: give one of them")
    try:
        request = RetractRequest(**parse_selection(args), dry_run=not args.yes)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        check_app(settings, LedgerReader(settings.table_root), request.app)
    except LedgerError as exc:
        return ledger_error(exc)

    def show(plan: RetractPlan) -> None:
        """The plan, on stderr, before anything is deleted."""
        for line in format_plan(plan):
            print(line, file=sys.stderr)

    try:
        summary = run_retract(
            settings,
            request,
            on_plan=None if args.json else show,
            wait=args.wait,
            say=say_on_stderr,
            holder=f"ackfold retract ({request.requested_by})",
        )
    except (EffectsError, LedgerError) as exc:
        return ledger_error(exc)
    emit(json.dumps(summary.as_dict(), indent=2) if args.json else format_summary(summary))
    if summary.failed:
        return 1
    # Dead letters with nothing left to delete, or skipped with their reason, are done (a
    # retract run twice succeeds); a selection that matches none is a mistake, as a
    # replay's is.
    return 0 if summary.plan.selected else 1


def format_plan(plan: Any) -> list[str]:
    """One line per dead letter and output with rows to delete, then the outputs that
    cannot be read, then the skipped roots by reason."""
    from ackfold.ledger.schema.ids import format_id

    verb = "would delete" if plan.request.dry_run else "deleting"
    lines = []
    for root in plan.roots:
        head = f"{format_id(root.root.root_id)} {root.root.app}"
        if not root.outputs:
            lines.append(f"{head}: its app declares no outputs (ackfold outputs --declare)")
        elif not root.has_effects and not root.problems:
            lines.append(f"{head}: no rows of its origin in any declared output")
        for o in root.outputs:
            if o.rows and not o.read_by_stage:
                lines.append(f"{verb} {o.rows} row(s) of {head} from {o.output.output}")
    for output, why in sorted(plan.problems.items()):
        lines.append(f"cannot read {output}: {why}")
    for output, why in sorted(plan.kept.items()):
        lines.append(f"leaving {output}: {why}")
    for reason, n in sorted(plan.skipped.items()):
        lines.append(f"skipping {n} root(s): {reason}")
    return lines


def format_summary(summary: Any) -> str:
    plan = summary.plan
    if not plan.roots:
        return "no dead letter to retract: " + (
            "; ".join(f"{n} skipped, {why}" for why, n in plan.skipped.items())
            or f"none matches {plan.request.describe()}"
        )
    if not plan.with_effects:
        return (
            f"nothing to delete: {len(plan.roots)} dead letter(s) selected, none has rows in "
            "its app's declared outputs"
        )
    if summary.dry_run:
        rows = sum(plan.per_output().values())
        return (
            f"dry run, nothing deleted: {rows} row(s) of {len(plan.with_effects)} dead "
            f"letter(s) in {len(plan.per_output())} output(s); run again with --yes to delete"
        )
    parts = [f"{n} row(s) from {output}" for output, n in sorted(summary.deleted.items())]
    parts += [f"failed on {output}: {why}" for output, why in sorted(summary.failed.items())]
    return f"retract {summary.retract_id}: deleted " + ("; ".join(parts) or "nothing")


def _outputs(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.effects import OutputDeclarationError, declare_output, declared_outputs

    if args.declare:
        if not args.app:
            raise UsageError("--declare needs --app: the app that writes the table")
        try:
            declared = declare_output(
                settings.table_root,
                args.app,
                args.declare,
                origin_column=args.origin_column,
                clean=args.clean,
            )
        except OutputDeclarationError as exc:
            raise UsageError(str(exc)) from None
        emit(json.dumps(declared.as_dict()) if args.json else f"declared {declared.output}")
        return 0
    if args.clean or args.origin_column != "origin_root_id":
        raise UsageError("--clean and --origin-column go with --declare TABLE")
    found = declared_outputs(settings, args.app)
    if args.json:
        emit(json.dumps([d.as_dict() for d in found], indent=2))
    else:
        lines = [
            f"{d.app}  {d.output}  origin={d.origin_column}{'  clean' if d.clean else ''}"
            f"  (by {d.declared_by})"
            for d in found
        ]
        emit("\n".join(lines) or "no declared outputs")
    return 0
