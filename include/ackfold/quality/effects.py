"""What the dead letters left behind, as a quality suite: per app, the rows its dead letters
have in each of its declared outputs (`ackfold.effects`), counted, and none at all in an
output marked `clean`.

A dead letter's message ran out of attempts; what its tree wrote before it failed stays in
the outputs until someone retracts it (`ackfold retract`). The suite's batch is one row,
a column of counts per declared output (`rows_0`, `rows_1`, ... in the order of
`declared_outputs`), so that each output's count is its own result in `quality_results`
and Data Docs:

- `dead_letter_rows`: an output's count, recorded (it never fails on a number);
- `clean_output`: an output marked clean holds no row of a dead letter (`apps.<app>.outputs`
  `clean: true`, or `declare_output(..., clean=True)`).

An output that cannot be read (no table, no origin column) has no count: its
`dead_letter_rows` fails with the reason in its description, as its `clean_output` would.
The counts are read the same way on either engine: delta-rs, in this process, filtered by
the dead letters' origins as values (`ackfold.effects.find`), never as SQL text.

Example:
    >>> from ackfold.effects.outputs import DeclaredOutput
    >>> counts = [OutputCount(DeclaredOutput("wordcount", "/w/counted", clean=True), 12, 2)]
    >>> suite = effects_suite("wordcount", counts)
    >>> [e.meta["check"] for e in suite.expectations], effects_row(counts)
    (['clean_output'], {'rows_0': 12})
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ackfold.quality.expectations import Suite, expect

if TYPE_CHECKING:
    from ackfold.config import Settings
    from ackfold.effects.outputs import DeclaredOutput

CLEAN_OUTPUT: Final = "clean_output"
DEAD_LETTER_ROWS: Final = "dead_letter_rows"


@dataclass(frozen=True)
class OutputCount:
    """The rows an app's dead letters have in one declared output, and how many dead
    letters have any; `rows` is None, with `problem`, when the output cannot be read."""

    output: DeclaredOutput
    rows: int | None
    dead_letters: int = 0
    problem: str | None = None
    read_by_stage: bool = False  # an intermediate table: a retract leaves its rows


def dead_letter_counts(settings: Settings, app: str) -> list[OutputCount]:
    """Per declared output of `app` (in `declared_outputs`' order), its dead letters' rows
    there: one read per output for all of them. A dead letter whose message a later
    attempt completed (a replay by hand) is no longer one: its origin's rows are that
    attempt's output."""
    from ackfold.effects.find import find_effects
    from ackfold.effects.outputs import declared_outputs
    from ackfold.effects.roots import COMPLETED, dead_letters, refusals

    outputs = declared_outputs(settings, app)
    if not outputs:
        return []
    rows = dict.fromkeys((o.output for o in outputs), 0)
    letters = dict.fromkeys(rows, 0)
    problems: dict[str, str] = {}
    read: set[str] = set()
    dead = dead_letters(settings, app=app)
    done = {r for r, why in refusals(settings, dead).items() if why.kind == COMPLETED}
    still = [root for root in dead if root.root_id not in done]
    for root in find_effects(settings, still, sample=0, outputs=outputs):
        for found in root.outputs:
            where = found.output.output
            if found.read_by_stage:
                read.add(where)
            if found.problem is not None:
                problems[where] = found.problem
            elif where in rows and found.rows:
                rows[where] += found.rows
                letters[where] += 1
    if len(problems) < len(outputs):
        # Dead letters bring the problems to light; without any, ask each output once.
        problems.update(_unreadable(settings, outputs, problems))
    return [
        OutputCount(o, None, 0, problems[o.output])
        if o.output in problems
        else OutputCount(o, rows[o.output], letters[o.output], None, o.output in read)
        for o in outputs
    ]


def _unreadable(
    settings: Settings, outputs: Sequence[DeclaredOutput], known: dict[str, str]
) -> dict[str, str]:
    """Why each output not in `known` cannot be read, found by looking up no root in it."""
    from ackfold.effects.find import find_effects
    from ackfold.effects.roots import RootRef

    left = [o for o in outputs if o.output not in known]
    if not left:
        return {}
    probe = RootRef(root_id=0, app=left[0].app, origin_root_id=0)
    (effects,) = find_effects(settings, [probe], sample=0, outputs=left)
    return effects.problems


def effects_suite(app: str, counts: Sequence[OutputCount]) -> Suite:
    """The suite over `effects_row(counts)`: each output's count, none in a clean one."""
    expectations = []
    for i, count in enumerate(counts):
        where = count.output.output
        unreadable = f" (cannot be read: {count.problem})" if count.problem else ""
        back = f"`ackfold retract --app {app}` takes them back"
        if count.read_by_stage:  # a delete would stop the stage's stream
            back = "a stage reads it: a retract leaves them"
        if count.output.clean:
            expectations.append(
                expect(
                    "ExpectColumnMaxToBeBetween",
                    CLEAN_OUTPUT,
                    f"{app}: no dead letter has rows in {where}, an output marked clean "
                    f"({back}){unreadable}",
                    column=f"rows_{i}",
                    min_value=0,
                    max_value=0,
                )
            )
        else:
            expectations.append(
                expect(
                    "ExpectColumnMaxToBeBetween",
                    DEAD_LETTER_ROWS,
                    f"{app}: the rows its dead letters left in {where}, counted "
                    f"({back}){unreadable}",
                    column=f"rows_{i}",
                    min_value=0,
                )
            )
    return Suite(f"delivery.{app}.dead_letter_effects", app, (), expectations, cached=False)


def effects_row(counts: Sequence[OutputCount]) -> dict[str, Any]:
    """The batch's one row: `rows_<i>`, the count of the i-th output (None: unreadable)."""
    return {f"rows_{i}": count.rows for i, count in enumerate(counts)}
