"""The producer test vectors (`docs/ledger/test-vectors.json`) on Spark: the SQL ids of
`ackfold.track.sql_ids`, which the Spark trackers derive every id with, give every
vector's value (one select, one job), and the Spark engine folds the vectors' ledgers to
their statuses, as the embedded one does (tests/unit/test_ledger_vectors.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from ackfold.config import load_settings
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.runs.reconcile import reconcile
from ackfold.track import sql_ids
from tests.conftest import JARS_DIR
from tests.replay_ledger import statuses
from tests.vectors import all_ledgers, now, vectors


def big(value: str | int) -> Column:
    return F.lit(int(value)).cast("bigint")


def expressions() -> list[tuple[str, Column, Any]]:
    """(what, the SQL expression, the vector's value) for every id vector."""
    v = vectors()
    found: list[tuple[str, Column, Any]] = []
    for c in v["hash64"]["cases"]:
        found.append(("hash64", sql_ids.hash64(*c["parts"]), int(c["id"])))
    for c in v["hash_numbers"]["cases"]:
        parts = [big(p["bigint"]) if "bigint" in p else F.lit(p["string"]) for p in c["parts"]]
        found.append(("hash_numbers", sql_ids.hash_numbers(*parts), int(c["id"])))
    for c in v["root_ids"]:
        origin = big(c["origin_root_id"]) if c["origin_root_id"] else F.lit(None).cast("bigint")
        key = F.lit(c.get("source_key", ""))
        expr = sql_ids.root_id(c["app"], key, F.lit(c["attempt"]), origin)
        found.append((f"root_id {c['kind']}", expr, int(c["root_id"])))
    for c in v["spout_tuple_ids"]:
        expr = sql_ids.spout_tuple_id(big(c["root_id"]), F.lit(c["scheme"]))
        found.append(("spout_tuple_id", expr, int(c["tuple_id"])))
    for c in v["tuple_ids"]:
        anchors = F.array(*[big(a) for a in c["anchor_ids"]])
        expr = sql_ids.tuple_id(c["stage"], F.lit(c["position"]), anchors, F.lit(c["scheme"]))
        found.append(("tuple_id", expr, int(c["tuple_id"])))
    for c in v["edge_ids"]:
        expr = sql_ids.edge_id(
            big(c["tuple_id"]), big(c["root_id"]), F.lit(c["anchor_index"]),
            F.lit(c["consumer"]), F.lit(c["scheme"]),
        )  # fmt: skip
        found.append(("edge_id", expr, int(c["edge_id"])))
    for c in v["short_edge_ids"]:
        expr = sql_ids.one_edge(big(c["tuple_id"]), big(c["root_id"]), F.lit(c["scheme"]))
        found.append(("one_edge", expr, int(c["edge_id"])))
    for c in v["event_ids"]:
        expr = sql_ids.event_id(c["app"], big(c["root_id"]), c["kind"], c["stage"],
                                big(c["tuple_id"]))  # fmt: skip
        found.append(("event_id", expr, c["event_id"]))
    for c in v["compact_event_ids"]:
        expr = sql_ids.compact_event_id(
            c["app"], big(c["root_id"]), c["stage"], F.lit(c["count"]), big(c["signature"])
        )
        found.append(("compact_event_id", expr, c["event_id"]))
    return found


def test_the_sql_ids_give_every_vector(spark: SparkSession) -> None:
    cases = expressions()
    assert len(cases) > 60
    row = spark.range(1).select(*[expr.alias(f"c{i}") for i, (_, expr, _) in enumerate(cases)])
    values = row.first()
    assert values is not None
    wrong = [
        (what, values[f"c{i}"], wanted)
        for i, (what, _, wanted) in enumerate(cases)
        if values[f"c{i}"] != wanted
    ]
    assert wrong == []


def test_the_spark_engine_folds_the_vector_ledgers_to_their_statuses(
    spark: SparkSession, tmp_path: Path
) -> None:
    roots, events, expected = all_ledgers()
    settings = load_settings(
        var_dir=tmp_path / "var",
        jars_dir=JARS_DIR,
        defaults={"timeout": f"{vectors()['ledgers']['timeout_seconds']:g}s"},
    )
    LedgerWriter(settings.table_root).append(roots, events)
    reconcile(spark, settings, now=now())
    assert statuses(settings.table_root) == expected
