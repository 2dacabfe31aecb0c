"""`arrow_table` builds the Arrow table that both writers take from the driver's tuples: a
ledger table's rows as the contract types them, and rows that do not fit refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from ackfold.ledger.schema.contract import arrow_schema
from ackfold.ledger.schema.tables import SENT_MESSAGES
from ackfold.spark.frames import arrow_table


def test_a_ledger_tables_rows_take_the_contracts_types() -> None:
    at = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
    rows = [
        ("wordcount", "sqs", "sentences", "m-1", at),
        ("wordcount", "sqs", "sentences", "é", at),
    ]
    table = arrow_table(rows, arrow_schema(SENT_MESSAGES))
    assert table.schema == arrow_schema(SENT_MESSAGES)
    assert [tuple(r.values()) for r in table.to_pylist()] == rows


def test_no_rows_make_an_empty_table_of_the_schema() -> None:
    schema = pa.schema([("root_id", pa.int64()), ("status", pa.string())])
    assert arrow_table([], schema).equals(schema.empty_table())


def test_a_row_of_the_wrong_length_is_refused_naming_the_columns() -> None:
    schema = pa.schema([("root_id", pa.int64()), ("status", pa.string())])
    with pytest.raises(ValueError, match="a row of 1 values for 2 columns: root_id, status"):
        arrow_table([(7, "sent"), (8,)], schema)


def test_a_value_of_the_wrong_type_is_refused() -> None:
    schema = pa.schema([("root_id", pa.int64())])
    with pytest.raises(pa.ArrowInvalid):
        arrow_table([("seven",)], schema)
