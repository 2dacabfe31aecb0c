"""The tracked tuple: one record's id, the roots it belongs to, and the stages it goes to.

A tuple's edges are what the acks XOR (``docs/decisions/ids-and-edges.md``): one per root
of its tree, anchor and consumer. A tuple emitted ``to=[]`` goes to no stage (a sink's
output): it has no edges, so it adds nothing to any tree, as in Storm a tuple emitted to a
stream without subscribers. ``Tracker`` (``ackfold.track.tracker``) makes tuples and
``StageTracker`` (``ackfold.track.stage``) their column twins; both name apps, stages and
consumers as ``check_name`` and ``consumers_of`` say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from ackfold.ledger.schema import ids, schemes
from ackfold.ledger.schema.values import hex64

# The consumer of a tuple emitted without `to`: whichever stage processes it.
UNNAMED: Final = ""


def check_name(what: str, value: object) -> str:
    """``value`` if it can name an app or a stage (a non-empty string without the ids'
    separator), else a ValueError naming ``what``."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    if ids.SEP in value:
        raise ValueError(f"{what} {value!r} contains the separator \\x1f")
    return value


def consumers_of(to: Sequence[str] | None) -> tuple[str, ...]:
    """The consumers of a tuple emitted with ``to``: ``("",)`` (any one stage) for None,
    ``()`` (no stage: a sink's output) for an empty sequence, else the named stages, each
    checked and named once.

    Example:
        >>> consumers_of(None), consumers_of([]), consumers_of(["count", "audit"])
        (('',), (), ('count', 'audit'))
    """
    if to is None:
        return (UNNAMED,)
    if isinstance(to, str):
        raise ValueError(f"to must be a sequence of stage names, got the string {to!r}")
    names = tuple(check_name("consumer stage", name) for name in to)
    if len(set(names)) != len(names):
        raise ValueError(f"to names a consumer twice: {list(names)}")
    return names


def spout_consumers_of(to: Sequence[str] | None) -> tuple[str, ...]:
    """``consumers_of(to)`` for a root's first tuple, which must go to some stage: a root
    whose first tuple goes nowhere would complete at once, unprocessed."""
    consumers = consumers_of(to)
    if not consumers:
        raise ValueError(
            "a spout's tuples must go to at least one stage: with to=[] the root would "
            "complete at once, unprocessed; name the stages that process it, or leave to=None "
            "(any one stage), and ack it in the stage that stores it"
        )
    return consumers


def sink_use_message(stage: str, what: str) -> str:
    """Why ``stage`` may not process ``what``, a tuple emitted ``to=[]``, and what to do."""
    return (
        f"stage {stage!r} cannot process tuple {what}: it was emitted to=[] (a sink's output, "
        "consumed by no stage, so it carries no edges and nothing acks it); if a stage "
        "consumes it, emit it with to=None or to=[that stage]"
    )


@dataclass(frozen=True, repr=False)
class Tuple:
    """One tracked record: its id, the roots it belongs to, and who consumes it.

    ``anchor_roots[k]`` holds the roots of the tuple's k-th anchor (a spout tuple has one
    pseudo-anchor holding its root); ``consumers`` is ``("",)`` when any one stage may ack
    it, ``()`` for a sink's output (no stage acks it), else the stages it is delivered to,
    each of which acks its own copy.

    Example:
        >>> t = Tuple(id=255, roots=(7,), anchor_roots=(frozenset({7}),), stage="parse")
        >>> t
        Tuple(0x00000000000000ff, stage='parse', roots=1)
        >>> t.consumer_key("anything")
        ''
    """

    id: int
    roots: tuple[int, ...]
    anchor_roots: tuple[frozenset[int], ...]
    consumers: tuple[str, ...] = (UNNAMED,)
    # Who created it: for messages only, the id already depends on it.
    stage: str = field(default="", compare=False)
    # How its id and edges are derived (`ackfold.ledger.schema.schemes`): its roots' scheme.
    scheme: int = schemes.TEXT

    def __repr__(self) -> str:
        return f"Tuple({hex64(self.id)}, stage={self.stage!r}, roots={len(self.roots)})"

    def consumer_key(self, stage: str) -> str:
        """The consumer whose edges ``stage`` acks: ``""`` if unnamed, else ``stage``.

        A sink's output (``to=[]``) has no consumer: no stage may ack, fail or anchor to it.
        """
        if self.consumers == (UNNAMED,):
            return UNNAMED
        if not self.consumers:
            raise ValueError(sink_use_message(stage, repr(self)))
        if stage not in self.consumers:
            raise ValueError(
                f"stage {stage!r} is not a consumer of tuple {self!r} "
                f"(it was emitted to {list(self.consumers)})"
            )
        return stage

    @property
    def short(self) -> bool:
        """Whether it has one edge only: one root, through one anchor (or a spout's
        pseudo-anchor), to any one consumer (the short form of ``_ackfold``, in Spark)."""
        return (
            len(self.anchor_roots) == 1
            and len(self.anchor_roots[0]) == 1
            and self.consumers == (UNNAMED,)
        )

    def edge(self, root: int, anchor_index: int, consumer: str) -> int:
        """Its edge in ``root``'s tree, through anchor ``anchor_index``, to ``consumer``."""
        if self.short:
            return schemes.one_edge(self.id, root, self.scheme)
        return schemes.edge_id(self.id, root, anchor_index, consumer, self.scheme)

    def value(self, root: int, consumer: str) -> int:
        """XOR of this tuple's edges in ``root``'s tree for ``consumer``, one per anchor."""
        acc = 0
        for k, anchor_roots in enumerate(self.anchor_roots):
            if root in anchor_roots:
                acc ^= self.edge(root, k, consumer)
        return acc
