"""The smoke job without a JVM: proves delta-rs and the warehouse work together, as
`ackfold.spark.smoke` proves it for Spark. It creates a Delta table with an explicit
schema, appends, MERGEs, time-travels and reads it back, and returns what it saw."""

from __future__ import annotations

from typing import Any, Final

EXPECTED: Final = {"storm": 1, "spark": 3, "delta": 1}


def run_smoke(uri: str, storage_options: dict[str, str] | None = None) -> dict[str, Any]:
    """Round-trip a small Delta table at `uri` (a new empty version of it if it exists)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("word", pa.string(), nullable=False),
            pa.field("n", pa.int64(), nullable=False),
        ]
    )

    def rows(*values: tuple[int, str, int]) -> pa.Table:
        return pa.table(
            {name: [v[i] for v in values] for i, name in enumerate(schema.names)},
            schema=schema,
        )

    options = storage_options or None

    def table(version: int | None = None) -> DeltaTable:
        return DeltaTable(uri, version=version, storage_options=options)

    write_deltalake(uri, rows(), mode="overwrite", schema_mode="overwrite", storage_options=options)
    created = table().version()
    first = rows((1, "storm", 1), (2, "spark", 1))
    write_deltalake(uri, first, mode="append", storage_options=options)
    (
        table()
        .merge(rows((2, "spark", 2), (3, "delta", 1)), "t.id = s.id", "s", "t")
        .when_matched_update({"n": "t.n + s.n"})
        .when_not_matched_insert_all()
        .execute()
    )
    after_append = table(created + 1).to_pyarrow_table()
    now = table().to_pyarrow_table().to_pylist()
    return {
        "path": uri,
        "words": {row["word"]: row["n"] for row in now},
        "rows_after_append": after_append.num_rows,
    }


def check(report: dict[str, Any]) -> bool:
    """True when the round trip saw exactly what it wrote."""
    return bool(report["words"] == EXPECTED and report["rows_after_append"] == 2)
