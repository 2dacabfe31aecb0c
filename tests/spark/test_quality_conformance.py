"""Both engines give the same quality outcomes on the same ledger: every check's verdict,
observed value and counts, and the roots its sample names.

The ledger (`tests.quality_ledger`) holds every fault the quality tests seed, and roots at
the edges of their timeout, idle timeout and backoff; it is checked before any root is
overdue, once every root is, and after a writer broke the schema. The embedded engine's
own tests (`tests/unit/test_quality_*.py`) say what each outcome must be; this module
says Spark agrees, and is the Spark engine's test of the checks.
"""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ackfold.config import Settings
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS, Ledger
from ackfold.quality import QualityReport
from ackfold.quality.validator import SAMPLE
from ackfold.runs import run_quality
from tests.conftest import JARS_DIR
from tests.quality_ledger import (
    FaultyLedger,
    faulty_ledger,
    quality_settings,
    timing_ledger,
    timing_settings,
)

ROOT = re.compile(r"root_id=(0x[0-9a-f]+)")


def engines(settings: Settings) -> tuple[Settings, Settings]:
    """`settings` on the embedded engine, and on Spark."""
    embedded = settings.model_copy(
        update={"engine": settings.engine.model_copy(update={"kind": "embedded"})}
    )
    spark = settings.model_copy(
        update={
            "engine": settings.engine.model_copy(update={"kind": "spark"}),
            "jars_dir": JARS_DIR,
        }
    )
    return embedded, spark


def outcomes(report: QualityReport) -> dict[str, dict[str, Any]]:
    """Each check's outcome, as both engines must give it. The sample's roots, when it
    shows every unexpected row (beyond `SAMPLE`, each engine may show others)."""
    found = {}
    for r in report.results:
        unexpected = r.unexpected_count or 0  # GX on Spark says None of an empty batch
        complete = unexpected <= SAMPLE and not r.observed.startswith(">")
        found[f"{r.suite} {r.check}"] = {
            "success": r.success,
            "observed": r.observed,
            "element_count": r.element_count,
            "unexpected_count": unexpected,
            "threshold": r.threshold,
            "sampled_roots": sorted({m for s in r.sample for m in ROOT.findall(s)})
            if complete
            else None,
        }
    return found


def both(
    spark: SparkSession, settings: Settings, now: datetime, **kwargs: Any
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    embedded, on_spark = engines(settings)
    return (
        outcomes(run_quality(embedded, now=now, **kwargs)),
        outcomes(run_quality(on_spark, spark=spark, now=now, **kwargs)),
    )


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FaultyLedger]:
    var = tmp_path_factory.mktemp("conformance") / "var"
    return var, faulty_ledger(var / "warehouse")


@pytest.mark.parametrize("when", ["early", "late"])
def test_every_check_has_the_same_outcome_on_both_engines(
    spark: SparkSession, faulty: tuple[Path, FaultyLedger], when: str
) -> None:
    var, ledger = faulty
    embedded, on_spark = both(spark, quality_settings(var), getattr(ledger, when))
    assert embedded == on_spark
    assert not all(o["success"] for o in embedded.values()), "the faults were seen"


def test_the_timing_edges_have_the_same_outcomes(spark: SparkSession, tmp_path: Path) -> None:
    settings = timing_settings(tmp_path)
    now = datetime.now(UTC).replace(microsecond=0)
    timing_ledger(settings.table_root, now)
    for at in (now, now + timedelta(hours=3)):
        embedded, on_spark = both(spark, settings, at)
        assert embedded == on_spark


def test_a_schema_break_has_the_same_verdicts(
    spark: SparkSession, faulty: tuple[Path, FaultyLedger], tmp_path: Path
) -> None:
    """A writer drops a contract column from ack_events, another writes payloads as bytes.
    The checks of the missing column fail on both engines, each saying so its own way."""
    var, ledger = faulty
    copy = tmp_path / "var"
    shutil.copytree(var / "warehouse", copy / "warehouse")
    paths = Ledger(str(copy / "warehouse"))
    events = spark.read.format("delta").load(paths.path(ACK_EVENTS)).drop("stage")
    events.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
        paths.path(ACK_EVENTS)
    )
    roots = spark.read.format("delta").load(paths.path(ROOTS))
    roots = roots.withColumn("payload", roots.payload.cast("binary"))
    roots.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
        paths.path(ROOTS)
    )
    embedded, on_spark = both(spark, quality_settings(copy), ledger.late)
    errors = {"ledger.ack_events type.stage", "ledger.ack_events not_null.stage"}
    for check in errors:  # each engine words (or counts) a missing column its own way
        assert not embedded[check]["success"]
        assert not on_spark[check]["success"]
    assert {k: v for k, v in embedded.items() if k not in errors} == {
        k: v for k, v in on_spark.items() if k not in errors
    }
    assert "missing columns stage" in embedded["ledger.ack_events columns"]["observed"]
    assert embedded["ledger.roots type.payload"]["observed"] == "BinaryType"
