"""Finding effects: what a root's message left in its app's declared outputs.

Every tracked output row carries its origin root id (`ackfold.effects.outputs`), the same
on every attempt of a message. So a root's effects in an output are the rows of its
origin there: counted, with a few of them as a sample. For a dead letter (every attempt
failed) they are what its tree wrote before it ran out of attempts.

The outputs are read by delta-rs, in this process, with no JVM: one scan per output for
all the roots asked, filtered by origin with an Arrow expression (the origins are values,
never SQL text; the origin column a plain name, checked against the table's schema). An
output that cannot be read (no table at its path, no origin column, deletion vectors) is
reported on each root's `OutputEffects.problem`, in words that say how to fix it, and
never stops the others.

Example:
    >>> effects = root_effects(settings, 0x2A)                   # doctest: +SKIP
    >>> [(o.output.output, o.rows) for o in effects.outputs]     # doctest: +SKIP
    [('/warehouse/words', 3), ('/warehouse/counts', 3)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ackfold.effects.outputs import DeclaredOutput

if TYPE_CHECKING:
    from ackfold.config import Settings

# Sample rows per root and output, by default: what `ackfold show` and the UI list.
SAMPLE: Final = 3
# Columns dropped from a sample: the tuple identity, which no reader of a sink needs.
HIDDEN: Final = ("_ackfold",)


@dataclass(frozen=True)
class RootRef:
    """A root as `root_state` holds it: what finding its effects needs."""

    root_id: int
    app: str
    origin_root_id: int
    attempt: int | None = None
    status: str | None = None


@dataclass(frozen=True)
class OutputEffects:
    """A root's origin's rows in one declared output: how many, and up to a sample of
    them (JSON-ready values); or, `problem`, why the output could not be read."""

    output: DeclaredOutput
    rows: int = 0
    sample: tuple[dict[str, Any], ...] = ()
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": self.output.output,
            "origin_column": self.output.origin_column,
            "clean": self.output.clean,
            "rows": self.rows,
            "sample": list(self.sample),
            "problem": self.problem,
        }


@dataclass(frozen=True)
class RootEffects:
    """What `root` left in each declared output of its app (`outputs`, in the order of
    `declared_outputs`): empty when the app declares none."""

    root: RootRef
    outputs: tuple[OutputEffects, ...] = field(default=())

    @property
    def rows(self) -> int:
        """The root's origin's rows in all its app's outputs."""
        return sum(o.rows for o in self.outputs)

    @property
    def has_effects(self) -> bool:
        """Whether any output holds a row of the root's origin."""
        return self.rows > 0

    @property
    def problems(self) -> dict[str, str]:
        """Per output (its location) that could not be read, why."""
        return {o.output.output: o.problem for o in self.outputs if o.problem}

    def as_dict(self) -> dict[str, Any]:
        from ackfold.ledger.ids import format_id

        return {
            "root_id": format_id(self.root.root_id),
            "app": self.root.app,
            "origin_root_id": format_id(self.root.origin_root_id),
            "attempt": self.root.attempt,
            "status": self.root.status,
            "rows": self.rows,
            "outputs": [o.as_dict() for o in self.outputs],
        }


def find_effects(
    settings: Settings,
    roots: Sequence[RootRef],
    *,
    sample: int = SAMPLE,
    outputs: Sequence[DeclaredOutput] | None = None,
) -> list[RootEffects]:
    """The effects of each of `roots` (in their order) in its app's declared outputs
    (`outputs`, by default `declared_outputs(settings)`): one read per output for all of
    them, with at most `sample` rows per root and output (0: counts only)."""
    raise NotImplementedError


def root_effects(settings: Settings, root_id: int, *, sample: int = SAMPLE) -> RootEffects:
    """The effects of one root, found by its id in `root_state`; `UnknownRoots` if it is
    not there."""
    raise NotImplementedError


def dead_letter_effects(
    settings: Settings,
    *,
    app: str | None = None,
    root_ids: Sequence[int] | None = None,
    sample: int = 0,
) -> list[RootEffects]:
    """The effects of the dead letters (roots whose status is `dead_lettered` in
    `root_state`) of `app` (or every app), or of those of `root_ids` among them: for the
    failed-roots page (`has_effects` per dead letter), the delivery report and the quality
    counts (rows per output), and the `clean` outputs' expectation. Ordered by when they
    were dead-lettered, then root id."""
    raise NotImplementedError
