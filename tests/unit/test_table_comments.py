"""Every ledger table's `CREATE TABLE` statement parses: its comment is pasted between
single quotes (`ackfold.ledger.schema.tables.create_sql`), so it may hold none. Two tables of
issue 58 once did ("each app's"), and every Spark `create_tables` failed to parse."""

from __future__ import annotations

import pytest

from ackfold.ledger.schema.tables import TABLES, create_sql


@pytest.mark.parametrize("table", sorted(TABLES))
def test_a_tables_comment_holds_no_quote_that_would_end_its_literal(table: str) -> None:
    comment = TABLES[table][2]
    assert "'" not in comment, f"{table}: {comment!r}"
    statement = create_sql(table, f"delta.`/w/{table}`")
    assert statement.count("'") % 2 == 0
    assert f"COMMENT '{comment}'\n" in statement
