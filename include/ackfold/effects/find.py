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

from ackfold.effects.errors import OutputUnreadable
from ackfold.effects.outputs import DeclaredOutput
from ackfold.effects.roots import RootRef, dead_letters, roots_by_id

if TYPE_CHECKING:
    from ackfold.config import Settings

# Sample rows per root and output, by default: what `ackfold show` and the UI list.
SAMPLE: Final = 3
# The tuple column (`ackfold.track.layout.TUPLE_COLUMN`): an output that has it is a
# stage's input, read by a streaming query. Dropped from samples: no reader needs it.
TUPLE_COLUMN: Final = "_ackfold"
HIDDEN: Final = (TUPLE_COLUMN,)


@dataclass(frozen=True)
class OutputEffects:
    """A root's origin's rows in one declared output: how many, and up to a sample of
    them (JSON-ready values); or, `problem`, why the output could not be read.
    `read_by_stage`: the output carries the tuple column `_ackfold`, so a stage reads it
    as a stream (a retract leaves it: see `ackfold.effects.retract`)."""

    output: DeclaredOutput
    rows: int = 0
    sample: tuple[dict[str, Any], ...] = ()
    problem: str | None = None
    read_by_stage: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": self.output.output,
            "origin_column": self.output.origin_column,
            "clean": self.output.clean,
            "rows": self.rows,
            "sample": list(self.sample),
            "problem": self.problem,
            "read_by_stage": self.read_by_stage,
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
    def retractable_rows(self) -> int:
        """The root's origin's rows in the outputs no stage reads: what a retract takes
        (an intermediate table's rows, which a stage reads, stay: `read_by_stage`)."""
        return sum(o.rows for o in self.outputs if not o.read_by_stage)

    @property
    def has_effects(self) -> bool:
        """Whether an output that no stage reads (a sink's table, which people read) holds
        a row of the root's origin: what the failed-roots page shows, and what a retract
        takes away."""
        return self.retractable_rows > 0

    @property
    def problems(self) -> dict[str, str]:
        """Per output (its location) that could not be read, why."""
        return {o.output.output: o.problem for o in self.outputs if o.problem}

    def as_dict(self) -> dict[str, Any]:
        from ackfold.ledger.schema.ids import format_id

        return {
            "root_id": format_id(self.root.root_id),
            "app": self.root.app,
            "origin_root_id": format_id(self.root.origin_root_id),
            "attempt": self.root.attempt,
            "status": self.root.status,
            "rows": self.rows,
            "retractable_rows": self.retractable_rows,
            "has_effects": self.has_effects,
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
    from ackfold.effects.outputs import declared_outputs

    declared = list(outputs) if outputs is not None else declared_outputs(settings)
    apps = {r.app for r in roots}
    read: dict[tuple[str, str], _Found] = {}
    for output in declared:
        if output.app in apps:
            origins = {r.origin_root_id for r in roots if r.app == output.app}
            read[(output.app, output.output)] = _read(output, sorted(origins), sample)
    found = []
    for root in roots:
        effects = []
        for output in declared:
            if output.app != root.app:
                continue
            got = read[(output.app, output.output)]
            effects.append(
                OutputEffects(
                    output,
                    got.counts.get(root.origin_root_id, 0),
                    tuple(got.samples.get(root.origin_root_id, ())),
                    got.problem,
                    got.read_by_stage,
                )
            )
        found.append(RootEffects(root, tuple(effects)))
    return found


def root_effects(settings: Settings, root_id: int, *, sample: int = SAMPLE) -> RootEffects:
    """The effects of one root, found by its id in `root_state`; `UnknownRoots` if it is
    not there."""
    return find_effects(settings, roots_by_id(settings, [root_id]), sample=sample)[0]


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
    roots = dead_letters(settings, app=app, root_ids=root_ids)
    return find_effects(settings, roots, sample=sample)


@dataclass(frozen=True)
class _Found:
    """One output's rows per origin: counts, samples, or why it could not be read."""

    counts: dict[int, int] = field(default_factory=dict)
    samples: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    problem: str | None = None
    read_by_stage: bool = False


def _read(output: DeclaredOutput, origins: list[int], sample: int) -> _Found:
    """The rows of `origins` in `output`, by one scan filtered on its origin column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not origins:
        return _Found()
    try:
        table = open_output(output)
        dataset = table.to_pyarrow_dataset()
        matching = pc.field(output.origin_column).isin(pa.array(origins, pa.int64()))
        if sample > 0:
            rows = dataset.to_table(filter=matching)
        else:
            rows = dataset.to_table(columns=[output.origin_column], filter=matching)
    except OutputUnreadable as exc:
        return _Found(problem=str(exc))
    except Exception as exc:  # a layout or a store this reader cannot take: said per output
        from ackfold.ledger.reading.sql import first_line

        return _Found(problem=f"cannot read {output.output}: {first_line(exc)}")
    counts = rows.group_by(output.origin_column).aggregate([(output.origin_column, "count")])
    found = _Found(
        read_by_stage=TUPLE_COLUMN in pa.schema(table.schema().to_arrow()).names,
        counts=dict(
            zip(
                counts.column(output.origin_column).to_pylist(),
                counts.column(f"{output.origin_column}_count").to_pylist(),
                strict=True,
            )
        ),
    )
    if sample > 0:
        keep = [name for name in rows.column_names if name not in HIDDEN]
        for row in rows.select(keep).to_pylist():
            kept = found.samples.setdefault(row[output.origin_column], [])
            if len(kept) < sample:
                kept.append(_json_ready(row))
    return found


def open_output(output: DeclaredOutput) -> Any:
    """The `deltalake.DeltaTable` of `output`, checked: `OutputUnreadable`, in words that
    say how to fix it, when there is no Delta table at its location or it has no integer
    origin column."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from ackfold.ledger.storage.store import delta_uri, storage_options

    try:
        table = DeltaTable(delta_uri(output.output), storage_options=storage_options(output.output))
    except TableNotFoundError:
        raise OutputUnreadable(
            f"no Delta table at {output.output} (declared by {output.declared_by} for app "
            f"{output.app}): it is not written yet, or the declaration names the wrong place "
            "(apps.<app>.outputs, `ackfold outputs --declare`)"
        ) from None
    schema = pa.schema(table.schema().to_arrow())
    if output.origin_column not in schema.names:
        raise OutputUnreadable(
            f"{output.output} has no column {output.origin_column!r} (columns: "
            f"{', '.join(schema.names)}): declare the column that holds each row's origin "
            "root id (origin_column), or write it (docs/retract.md)"
        )
    if not pa.types.is_integer(schema.field(output.origin_column).type):
        raise OutputUnreadable(
            f"{output.output}: column {output.origin_column!r} is "
            f"{schema.field(output.origin_column).type}, not the origin root id (a bigint)"
        )
    return table


def _json_ready(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with values JSON can hold (times as ISO text, bytes as hex)."""
    import json

    def default(value: Any) -> Any:
        if isinstance(value, bytes):
            return value.hex()
        if hasattr(value, "isoformat"):
            return value.isoformat()
        return str(value)

    ready: dict[str, Any] = json.loads(json.dumps(row, default=default))
    return ready
