"""Declared outputs: where each app's effects live, so that the ledger can find a root's rows
(`ackfold.effects`, which merges these with the settings' in `declared_outputs`).

An app names its output tables and the column that holds each row's origin root id
(`origin_root_id` by default: `docs/decisions/replay-safe-sinks.md`). Three ways, merged
by `ackfold.effects.declared_outputs`:

- `StageTracker.write_batch(outputs=...)` declares each output table it writes, once per
  tracker (not per batch), and only where the ledger has no declaration of it yet;
- `declare_output(...)` (or `ackfold outputs --declare`) declares any other: a sink's
  MERGE target, a table a `Tracker` producer writes outside Spark; it may mark it `clean`;
- the settings, `apps.<app>.outputs` (`OutputSetting`): they win over the ledger's rows.

The ledger keeps them in `declared_outputs`, an optional table: a ledger without it
(contract v1) has no declared outputs, and reading it is never an error.

Example:
    >>> import tempfile
    >>> warehouse = tempfile.mkdtemp()
    >>> declare_output(warehouse, "wordcount", f"{warehouse}/counts", clean=True).clean
    True
    >>> [o.origin_column for o in read_declared(warehouse, app="wordcount")]
    ['origin_root_id']
    >>> read_declared(tempfile.mkdtemp())  # no table: nothing declared
    []
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from ackfold.ledger.errors import OutputDeclarationError
from ackfold.ledger.schema.tables import DECLARED_OUTPUTS, Ledger
from ackfold.ledger.schema.values import whoami

# The column of a tracked output that holds its rows' origin root (replay-safe sinks).
ORIGIN_COLUMN: Final = "origin_root_id"
# `declared_by` of the declarations `write_batch` makes, and of the settings' own.
WRITE_BATCH: Final = "write_batch"
SETTINGS: Final = "settings"
# A plain column name: the only form a declared origin column may take, as it is named in
# the delete's and the reads' expressions (values never are).
_COLUMN: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The output tables this process declared, per (warehouse, app): `declare_once`.
_DECLARED: dict[tuple[str, str], set[str]] = {}
log = logging.getLogger("ackfold.ledger.commits.outputs")
_FIELDS: Final = ("app", "output", "origin_column", "clean", "declared_by", "declared_at")


@dataclass(frozen=True)
class DeclaredOutput:
    """An output table of `app`: at `output` (as the app writes it), its rows' origin root
    ids in `origin_column`; `clean`: no dead letter may have rows there."""

    app: str
    output: str
    origin_column: str = ORIGIN_COLUMN
    clean: bool = False
    declared_by: str = SETTINGS
    declared_at: datetime | None = None

    def __post_init__(self) -> None:
        check_declaration(self.app, self.output, self.origin_column)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (`ackfold outputs --json`, the UI)."""
        at = self.declared_at.isoformat() if self.declared_at else None
        return {
            "app": self.app,
            "output": self.output,
            "origin_column": self.origin_column,
            "clean": self.clean,
            "declared_by": self.declared_by,
            "declared_at": at,
        }


def check_declaration(app: str, output: str, origin_column: str) -> None:
    """Raise `OutputDeclarationError` for an empty app or output, or an origin column that
    is no plain column name (letters, digits, `_`)."""
    if not isinstance(app, str) or not app.strip():
        raise OutputDeclarationError(f"an output needs its app's name, got {app!r}")
    if not isinstance(output, str) or not output.strip():
        raise OutputDeclarationError(
            f"app {app!r}: an output needs the table's location (a path or URI), got {output!r}"
        )
    if not isinstance(origin_column, str) or not _COLUMN.match(origin_column):
        raise OutputDeclarationError(
            f"app {app!r}, output {output}: origin_column must be a plain column name "
            f"(letters, digits, _), got {origin_column!r}"
        )


def declare_output(
    warehouse: str | Ledger,
    app: str,
    output: str,
    *,
    origin_column: str = ORIGIN_COLUMN,
    clean: bool = False,
    declared_by: str | None = None,
) -> DeclaredOutput:
    """Record in the ledger under `warehouse` that `app` writes its effects to the table at
    `output`, each row's origin root id in `origin_column`: one append to
    `declared_outputs` (made if missing). The newest declaration of (app, output) holds,
    so this also changes one (`clean`). Not a derived write: any app may make it.

    Example:
        >>> import tempfile
        >>> declare_output(tempfile.mkdtemp(), "orders", "s3://lake/orders").declared_by[:4]
        'cli:'
    """
    root = warehouse.root if isinstance(warehouse, Ledger) else warehouse
    declared = DeclaredOutput(
        app,
        output,
        origin_column,
        bool(clean),
        declared_by or whoami(),
        datetime.now(UTC),
    )
    _append(root, [declared])
    return declared


def declare_written(warehouse: str, app: str, outputs: Iterable[str]) -> list[str]:
    """`write_batch`'s declaration of the output tables at `outputs`, with the default origin
    column: only those the ledger has no declaration of (an explicit one, `clean` or
    another origin column, stays as it is). Returns the ones declared now. The caller
    (`StageTracker`) calls it once per output table, not per batch."""
    wanted = list(dict.fromkeys(outputs))
    if not wanted:
        return []
    known = {d.output for d in read_declared(warehouse, app=app)}
    now = datetime.now(UTC)
    new = [DeclaredOutput(app, o, ORIGIN_COLUMN, False, WRITE_BATCH, now) for o in wanted
           if o not in known]  # fmt: skip
    if new:
        _append(warehouse, new)
    return [d.output for d in new]


def declare_once(warehouse: str, app: str, outputs: Iterable[str]) -> None:
    """`declare_written` for the tables at `outputs` that this process has not declared yet
    for `app`: what `StageTracker.write_batch` calls after each batch, so a table is
    declared once per process, not per batch (per process, not per tracker: under Spark
    Connect each batch unpickles a fresh tracker, in a Python worker Spark reuses).
    A declaration that fails is logged, not raised, and not tried again by this process:
    it must never stop the app's writes (declare the table in the settings instead)."""
    done = _DECLARED.setdefault((warehouse, app), set())
    new = [path for path in dict.fromkeys(outputs) if path not in done]
    if not new:
        return
    done.update(new)
    try:
        declare_written(warehouse, app, new)
    except Exception as exc:  # the app's data is written: its declaration can wait
        log.warning(
            "app %s: could not declare its outputs %s (%s); declare them in the settings "
            "(apps.%s.outputs) to find their effects",
            app, ", ".join(new), exc, app,
        )  # fmt: skip


def read_declared(warehouse: str, *, app: str | None = None) -> list[DeclaredOutput]:
    """The declarations in the ledger under `warehouse` (the newest per app and output),
    of `app` or every app; [] when the ledger has no `declared_outputs` table."""
    from deltalake import DeltaTable

    from ackfold.ledger.storage.run_store import options_for
    from ackfold.ledger.storage.store import delta_uri

    path = Ledger(warehouse).path(DECLARED_OUTPUTS)
    options = options_for(path)
    if not DeltaTable.is_deltatable(delta_uri(path), options):
        return []
    rows = DeltaTable(delta_uri(path), storage_options=options).to_pyarrow_table().to_pylist()
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["declared_at"]):
        if app is None or row["app"] == app:
            newest[(row["app"], row["output"])] = row
    return [DeclaredOutput(**{k: r[k] for k in _FIELDS}) for _, r in sorted(newest.items())]


def _append(warehouse: str, declared: Sequence[DeclaredOutput]) -> None:
    import pyarrow as pa

    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.ledger.schema.contract import arrow_schema

    schema = arrow_schema(DECLARED_OUTPUTS)
    rows = pa.Table.from_pylist(
        [{k: v for k, v in d.as_dict().items() if k != "declared_at"}
         | {"declared_at": d.declared_at} for d in declared],
        schema=schema,
    )  # fmt: skip
    LedgerWriter(warehouse).append_arrow(DECLARED_OUTPUTS, rows)
