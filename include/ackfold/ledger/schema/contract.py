"""The ledger contract, for writers outside Spark: each table's schema as Delta, Arrow,
JSON Schema and SQL, and the check of a row against it.

Everything here is derived from the DDLs of `ackfold.ledger.schema.tables`, so a column added
there is in every rendering. `ackfold schema` prints these; `LedgerWriter` checks rows
with `check_rows` before it writes any.

Example:
    >>> from ackfold.ledger.schema.contract import json_schema
    >>> schema = json_schema("roots")
    >>> schema["properties"]["attempt"]["type"], "payload" in schema["required"]
    ('integer', False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ackfold.errors import AckfoldError
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, TABLES, column_specs

if TYPE_CHECKING:
    import pyarrow as pa

# The tables any writer may append (contract v1); the others are ackfold's own.
CONTRACT_TABLES: Final = (ACK_EVENTS, ROOTS)
# `ack_events.kind`: the one column whose values the contract fixes. Every module that
# writes, folds or checks events names the kinds from here.
INIT: Final = "init"
ACK: Final = "ack"
FAIL: Final = "fail"
EVENT_KINDS: Final = (INIT, ACK, FAIL)
# `roots.id_scheme`: how a root's tuple ids are derived (`ackfold.ledger.schema.schemes`; null: 1).
ID_SCHEMES: Final = (1, 2)
# The rows of one root come from different writers (its `roots` row from the spout, its
# events from each stage, its replays from the replay run), whose clocks may differ: by at
# most this much, ackfold assumes. A read bounded by one row's time widens by it to find
# the others (a root's registration may be stamped after its first event).
CLOCK_SKEW: Final = timedelta(days=1)
JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"

_INT64: Final = (-(2**63), 2**63 - 1)
_INT32: Final = (-(2**31), 2**31 - 1)


class ContractError(AckfoldError, ValueError):
    """A row that does not fit the contract: names the table, the row and the column."""


def _integer(bounds: tuple[int, int]) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and bounds[0] <= value <= bounds[1]
        )

    return check


def _aware(value: Any) -> bool:
    # A naive time is ambiguous: the ledger's times are UTC instants.
    return isinstance(value, datetime) and value.utcoffset() is not None


def _list_of_int64(value: Any) -> bool:
    check = _integer(_INT64)
    return isinstance(value, list | tuple) and all(v is None or check(v) for v in value)


# SQL type -> (Delta type, JSON Schema, Python check, what the check wants, in words).
_TYPES: Final[dict[str, tuple[Any, dict[str, Any], Callable[[Any], bool], str]]] = {
    "STRING": ("string", {"type": "string"}, lambda v: isinstance(v, str), "a str"),
    "BIGINT": (
        "long",
        {"type": "integer", "minimum": _INT64[0], "maximum": _INT64[1]},
        _integer(_INT64),
        "an int in the signed 64-bit range",
    ),
    "INT": (
        "integer",
        {"type": "integer", "minimum": _INT32[0], "maximum": _INT32[1]},
        _integer(_INT32),
        "an int in the signed 32-bit range",
    ),
    "BOOLEAN": ("boolean", {"type": "boolean"}, lambda v: isinstance(v, bool), "a bool"),
    "DOUBLE": (
        "double",
        {"type": "number"},
        lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "a float",
    ),
    "DATE": (
        "date",
        {"type": "string", "format": "date"},
        lambda v: isinstance(v, date) and not isinstance(v, datetime),
        "a datetime.date",
    ),
    "TIMESTAMP": (
        "timestamp",
        {"type": "string", "format": "date-time"},
        _aware,
        "a datetime with a time zone",
    ),
    "ARRAY<BIGINT>": (
        {"type": "array", "elementType": "long", "containsNull": True},
        {"type": "array", "items": {"type": ["integer", "null"]}},
        _list_of_int64,
        "a list of ints",
    ),
}


def _specs(table: str) -> tuple[tuple[str, str, bool], ...]:
    if table not in TABLES:
        raise ValueError(f"unknown ledger table {table!r}; tables: {', '.join(TABLES)}")
    return column_specs(TABLES[table][0])


def delta_schema(table: str) -> dict[str, Any]:
    """The Delta schema of `table`, as Spark writes it in the table's `schemaString`."""
    return {
        "type": "struct",
        "fields": [
            {"name": name, "type": _TYPES[kind][0], "nullable": nullable, "metadata": {}}
            for name, kind, nullable in _specs(table)
        ],
    }


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of `table`: what delta-rs maps its Delta schema to."""
    import json

    import pyarrow as pa
    from deltalake import Schema

    return pa.schema(Schema.from_json(json.dumps(delta_schema(table))).to_arrow())


def json_schema(table: str) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of one row of `table`, as a JSON object: times are
    RFC 3339 strings with an offset, nullable columns may be null or left out."""
    properties: dict[str, Any] = {}
    for name, kind, nullable in _specs(table):
        prop = dict(_TYPES[kind][1])
        if table == ACK_EVENTS and name == "kind":
            prop["enum"] = list(EVENT_KINDS)
        if nullable:
            prop = {"anyOf": [prop, {"type": "null"}]}
        properties[name] = prop
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": table,
        "description": TABLES[table][2],
        "type": "object",
        "properties": properties,
        "required": [name for name, _, nullable in _specs(table) if not nullable],
        "additionalProperties": False,
    }


def json_schemas(tables: Sequence[str]) -> dict[str, Any]:
    """One table's row schema; for several, one document with each under `$defs`."""
    if len(tables) == 1:
        return json_schema(tables[0])
    defs = {}
    for table in tables:
        schema = json_schema(table)
        del schema["$schema"]
        defs[table] = schema
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": "ackfold ledger contract v1",
        "description": "one row of each table, under $defs",
        "$defs": defs,
    }


def check_rows(table: str, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`rows` as dicts with every column of `table` (left-out nullable columns None), or
    `ContractError` for the first row that does not fit: an unknown column, a null in a
    NOT NULL column, a value of the wrong type, an unknown event kind. Values are never
    quoted in the error (a payload may be secret): only their type."""
    specs = _specs(table)
    names = [name for name, _, _ in specs]
    checked = []
    for index, row in enumerate(rows):
        where = f"{table} row {index}"
        if not isinstance(row, Mapping):
            raise ContractError(f"{where}: expected a dict of columns, got {type(row).__name__}")
        unknown = sorted(str(key) for key in row if key not in names)
        if unknown:
            raise ContractError(
                f"{where}: unknown column {unknown[0]!r}; the columns are {', '.join(names)}"
            )
        out = {}
        for name, kind, nullable in specs:
            value = row.get(name)
            if value is None:
                if not nullable:
                    raise ContractError(f"{where}: column {name!r} is NOT NULL, got no value")
            elif not _TYPES[kind][2](value):
                raise ContractError(
                    f"{where}: column {name!r} ({kind}) must be {_TYPES[kind][3]}, "
                    f"got {type(value).__name__}"
                )
            out[name] = value
        if table == ROOTS and out["id_scheme"] not in (None, *ID_SCHEMES):
            raise ContractError(
                f"{where}: column 'id_scheme' must be null or one of "
                f"{', '.join(map(str, ID_SCHEMES))} (ackfold.ledger.schema.schemes), "
                f"got {out['id_scheme']}"
            )
        if table == ACK_EVENTS and out["kind"] not in EVENT_KINDS:
            raise ContractError(
                f"{where}: column 'kind' must be one of {', '.join(EVENT_KINDS)}, "
                f"got {str(out['kind'])[:20]!r}"
            )
        checked.append(out)
    return checked
