"""`ackfold init` and `ackfold schema`: create an empty ledger, and print its contract for
writers in other languages; both without a JVM."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Final

from ackfold.cli.common import AddCommand, UsageError, emit, ledger_error
from ackfold.ledger.contract import CONTRACT_TABLES
from ackfold.ledger.tables import TABLES

if TYPE_CHECKING:
    from ackfold.config import Settings

FORMATS: Final = ("sql", "arrow", "json-schema")


def add_commands(command: AddCommand) -> None:
    """Register `ackfold init` and `ackfold schema`, with their arguments."""
    init = command(
        "init", _init, "create the ledger's missing tables (no JVM); existing ones are kept"
    )
    init.add_argument(
        "--warehouse",
        metavar="PATH",
        help="where the tables go (default: the `warehouse` setting)",
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
    from ackfold.ledger.errors import LedgerError
    from ackfold.ledger.writer import LedgerWriter

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


def _schema(settings: Settings, args: argparse.Namespace) -> int:
    fmt = args.format.strip().lower()
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {args.format!r}")
    tables = parse_tables(args.table)
    if fmt == "sql":
        from ackfold.ledger.tables import create_sql

        emit("\n\n".join(f"{create_sql(t, t)};" for t in tables))
    elif fmt == "json-schema":
        from ackfold.ledger.contract import json_schemas

        emit(json.dumps(json_schemas(tables), indent=2))
    else:
        from ackfold.ledger.contract import arrow_schema

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
