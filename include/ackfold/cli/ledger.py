"""`ackfold init`, `ackfold upgrade` and `ackfold schema`: create an empty ledger, add to
an existing one the optional columns of this release (the one command that changes the
schema of `roots` and `ack_events`), and print the contract for writers in other
languages; all without a JVM."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Final

from ackfold.cli.common import AddCommand, UsageError, emit, ledger_error
from ackfold.ledger.schema.contract import CONTRACT_TABLES
from ackfold.ledger.schema.tables import TABLES

if TYPE_CHECKING:
    from ackfold.config import Settings

FORMATS: Final = ("sql", "arrow", "json-schema")
UPGRADE_HELP: Final = (
    "add to roots and ack_events the optional columns of this release (a schema change)"
)
UPGRADE_DESCRIPTION: Final = """\
Add to the ledger's roots and ack_events the nullable columns ackfold added after
contract v1 (roots.id_scheme), one metadata commit per table that lacks any; print
each column added. Idempotent: a second run adds nothing. No other command changes
the schema of these tables; until this runs, ackfold reads and writes them as they are
(new roots there use the text id scheme).

Before you run it:
- Delta streams that read a table stop at a schema change and must be restarted:
  restart the SQS apps (they stream roots) after it.
- A producer that appends with a plain write_deltalake(..., mode="append") and leaves
  the new column out then fails with a schema mismatch: it must append with
  schema_mode="merge", or give the column (null is fine). See docs/ledger.md."""


def add_commands(command: AddCommand) -> None:
    """Register `ackfold init`, `ackfold upgrade` and `ackfold schema`, with their
    arguments."""
    init = command(
        "init", _init, "create the ledger's missing tables (no JVM); existing ones are kept"
    )
    init.add_argument(
        "--warehouse",
        metavar="PATH",
        help="where the tables go (default: the `warehouse` setting)",
    )
    upgrade = command("upgrade", _upgrade, UPGRADE_HELP)
    upgrade.description = UPGRADE_DESCRIPTION
    upgrade.formatter_class = argparse.RawDescriptionHelpFormatter
    upgrade.add_argument(
        "--warehouse",
        metavar="PATH",
        help="the ledger to upgrade (default: the `warehouse` setting)",
    )
    schema = command("schema", _schema, "print the ledger contract, for writers in other languages")
    schema.add_argument(
        "--format",
        default="sql",
        metavar="FORMAT",
        help=f"{', '.join(FORMATS)} (default sql: Delta DDL with partitioning and properties)",
    )
    schema.add_argument(
        "--table",
        action="append",
        metavar="T[,T...]",
        help=f"these tables (comma-separated or repeated), or `all` (default: the contract's "
        f"{' and '.join(CONTRACT_TABLES)})",
    )


def _init(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.ledger.errors import LedgerError

    warehouse = settings.table_root if args.warehouse is None else args.warehouse.strip()
    if not warehouse:
        raise UsageError("--warehouse must name a directory or a URI, got an empty string")
    writer = LedgerWriter(warehouse)
    try:
        created = writer.create()
    except LedgerError as exc:
        return ledger_error(exc)
    for table, made in created.items():
        emit(f"{'created' if made else 'exists '} {writer.ledger.path(table)}")
    return 0


def _upgrade(settings: Settings, args: argparse.Namespace) -> int:
    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.ledger.errors import LedgerError
    from ackfold.ledger.setup.upgrade import upgrade

    warehouse = settings.table_root if args.warehouse is None else args.warehouse.strip()
    if not warehouse:
        raise UsageError("--warehouse must name a directory or a URI, got an empty string")
    try:
        added = upgrade(LedgerWriter(warehouse))
    except LedgerError as exc:
        return ledger_error(exc)
    for line in added:
        emit(f"added {line}")
    if not added:
        emit(f"up to date: {warehouse} (nothing added)")
    return 0


def _schema(settings: Settings, args: argparse.Namespace) -> int:
    fmt = args.format.strip().lower()
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {args.format!r}")
    tables = parse_tables(args.table)
    if fmt == "sql":
        from ackfold.ledger.schema.tables import create_sql

        emit("\n\n".join(f"{create_sql(t, t)};" for t in tables))
    elif fmt == "json-schema":
        from ackfold.ledger.schema.contract import json_schemas

        emit(json.dumps(json_schemas(tables), indent=2))
    else:
        from ackfold.ledger.schema.contract import arrow_schema

        emit(
            "\n\n".join(
                f"-- {t}: {TABLES[t][2]}\n{arrow_schema(t).to_string(show_schema_metadata=False)}"
                for t in tables
            )
        )
    return 0


def parse_tables(values: list[str] | None) -> tuple[str, ...]:
    """`--table` values: names, comma-separated or repeated, or `all`; default the
    contract's tables. An unknown name raises `UsageError`."""
    if not values:
        return CONTRACT_TABLES
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    if "all" in names:
        return tuple(TABLES)
    for name in names:
        if name not in TABLES:
            raise UsageError(f"--table: unknown table {name!r}; tables: {', '.join(TABLES)}, all")
    if not names:
        raise UsageError("--table needs a table name")
    return tuple(dict.fromkeys(names))
