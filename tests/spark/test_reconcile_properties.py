"""The Spark reconciler against the reference fold on random tuple DAGs (hypothesis).

Each example is a batch of random programs (trees, diamonds, multi-root aggregations, dup
anchoring, fails, missing acks), whose events are shuffled, split into reconcile runs and
partly duplicated. Few examples: each one costs several real reconciles.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.ledger.tables import Ledger
from ackfold.reconcile.fold import classify, fold
from ackfold.reconcile.reconciler import reconcile
from tests.conftest import JARS_DIR
from tests.spark.ledger_io import append, state
from tests.unit.tuple_programs import T0, execute, programs

TIMEOUT = timedelta(days=1)


@settings(
    max_examples=3,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(programs(), min_size=5, max_size=20),
    st.randoms(use_true_random=False),
)
def test_random_dags_shuffled_split_and_duplicated_fold_like_the_reference(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    batch: list,  # type: ignore[type-arg]
    rnd: random.Random,
) -> None:
    events = [e for k, program in enumerate(batch) for e in execute(program, f"prop{k}").events]
    var: Path = tmp_path_factory.mktemp("props")
    settings_ = load_settings(var_dir=var, jars_dir=JARS_DIR, defaults={"timeout": "1d"})
    ledger = Ledger(settings_.table_root)

    shuffled = rnd.sample(events, len(events))
    cut1, cut2 = sorted(rnd.randint(0, len(shuffled)) for _ in range(2))
    runs = [shuffled[:cut1], shuffled[cut1:cut2], shuffled[cut2:]]
    duplicates = rnd.sample(events, min(len(events), 5))
    runs[-1] = runs[-1] + duplicates  # copies of events already folded, or in the same run
    for run in runs:
        if run:
            append(spark, ledger, "ack_events", run)
        reconcile(spark, settings_, now=T0)

    expected = {
        root: (classify(f, now=T0, timeout=TIMEOUT), f.xor_acc, f.event_count)
        for root, f in fold(events).items()
    }
    actual = {
        r: (row["status"], row["xor_acc"], row["event_count"])
        for r, row in state(spark, ledger).items()
    }
    assert actual == expected
