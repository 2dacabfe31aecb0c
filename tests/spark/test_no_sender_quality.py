"""A root dead-lettered because its source has no sender is settled on both engines'
quality checks, with the same outcome that says why (invariant 15); the replay's side
of it, on both engines, is tests/spark/test_replay_conformance.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.embedded import duck
from ackfold.ledger.schema import status
from ackfold.quality.batches import LedgerFrames, Window
from ackfold.quality.duck_batches import LedgerViews
from ackfold.quality.outcomes import NO_SENDER_OUTCOME
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replay import run_replay
from tests.conftest import JARS_DIR
from tests.replay_ledger import files_orders


def test_both_engines_say_a_no_sender_dead_letter_is_settled_and_why(
    spark: SparkSession, tmp_path: Path
) -> None:
    settings = load_settings(
        var_dir=tmp_path / "var",
        jars_dir=JARS_DIR,
        engine={"kind": "embedded"},
        defaults={"timeout": "5m", "replay_backoff": "1s", "max_attempts": 3},
        apps={"orders": {"quality": {"max_dead_letter_rate": 0.5}}},
    )
    good, bad, _ = files_orders(settings)
    now = datetime.now(UTC) + timedelta(seconds=2)
    request = ReplayRequest(automatic=True, requested_by="test")
    assert run_replay(settings, request, now=now).dead_lettered == 1

    assert settings.quality.window is not None
    window = Window.ending(now, settings.quality.window)
    embedded = LedgerViews(duck.connect(settings), settings, window).overdue("orders")
    on_spark = LedgerFrames(spark, settings, window).overdue("orders").toPandas()
    expected = {bad: NO_SENDER_OUTCOME, good: status.COMPLETED}
    for frame in (embedded, on_spark):
        outcomes = dict(zip(frame["root_id"].tolist(), frame["outcome"].tolist(), strict=True))
        assert outcomes == expected
    # The checks read the outcome above, which the engines give alike. The run's verdict
    # on this ledger (no violation) is the embedded engine's, in plain Python
    # (tests/unit/test_replay_senders.py); every check's outcome alike on both engines is
    # tests/spark/test_quality_conformance.py's. GX on Spark is tens of seconds a run.
