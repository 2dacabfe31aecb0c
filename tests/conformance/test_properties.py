"""Each engine, and both in turn, against the reference fold on random tuple DAGs.

Each example is a batch of random programs (trees, diamonds, multi-root aggregations,
duplicate anchoring, fails, missing acks), whose events are shuffled, split into
reconcile runs and partly duplicated. On `embedded` every run is cheap, so it gets many
examples; Spark gets a few; `switching` hands the ledger from one engine to the other
between runs (invariant 15: the marks of what was folded are shared).
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ackfold.config import load_settings
from ackfold.ledger.schema.tables import ACK_EVENTS, Ledger
from ackfold.reconcile.fold import classify, fold
from tests.conformance.conftest import append, reconciler, state
from tests.conftest import JARS_DIR
from tests.unit.tuple_programs import T0, execute, programs

TIMEOUT = timedelta(days=1)


def _check(
    request: pytest.FixtureRequest,
    engines: list[str],
    var: Path,
    batch: list,  # type: ignore[type-arg]
    rnd: random.Random,
) -> None:
    events = [e for k, program in enumerate(batch) for e in execute(program, f"prop{k}").events]
    settings_ = load_settings(var_dir=var, jars_dir=JARS_DIR, defaults={"timeout": "1d"})
    ledger = Ledger(settings_.table_root)
    shuffled = rnd.sample(events, len(events))
    cut1, cut2 = sorted(rnd.randint(0, len(shuffled)) for _ in range(2))
    runs = [shuffled[:cut1], shuffled[cut1:cut2], shuffled[cut2:]]
    duplicates = rnd.sample(events, min(len(events), 5))
    runs[-1] = runs[-1] + duplicates  # copies of events already folded, or in the same run
    folded = 0
    for k, run in enumerate(runs):
        append(ledger, ACK_EVENTS, run)
        summary = reconciler(request, engines[k % len(engines)])(settings_, now=T0)
        folded += summary["events_folded"]

    expected = {
        root: (classify(f, now=T0, timeout=TIMEOUT), f.xor_acc, f.event_count)
        for root, f in fold(events).items()
    }
    actual = {
        r: (row["status"], row["xor_acc"], row["event_count"]) for r, row in state(ledger).items()
    }
    assert actual == expected
    assert folded == sum(f.event_count for f in fold(events).values())  # none folded twice


_SETTINGS = dict(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
_PROGRAMS = st.lists(programs(), min_size=5, max_size=20)


@settings(max_examples=25, **_SETTINGS)  # type: ignore[arg-type]
@given(_PROGRAMS, st.randoms(use_true_random=False))
def test_embedded_folds_random_dags_like_the_reference(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    batch: list,
    rnd: random.Random,  # type: ignore[type-arg]
) -> None:
    _check(request, ["embedded"], tmp_path_factory.mktemp("props"), batch, rnd)


@pytest.mark.parametrize("engine", ["spark"])
@settings(max_examples=3, **_SETTINGS)  # type: ignore[arg-type]
@given(_PROGRAMS, st.randoms(use_true_random=False))
def test_spark_folds_random_dags_like_the_reference(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    engine: str,
    batch: list,
    rnd: random.Random,  # type: ignore[type-arg]
) -> None:
    _check(request, [engine], tmp_path_factory.mktemp("props"), batch, rnd)


@pytest.mark.parametrize("engine", ["spark"])  # the runs on Spark share the spark tier's JVM
@settings(max_examples=3, **_SETTINGS)  # type: ignore[arg-type]
@given(_PROGRAMS, st.randoms(use_true_random=False), st.booleans())
def test_engines_in_turn_fold_random_dags_like_the_reference(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    engine: str,
    batch: list,  # type: ignore[type-arg]
    rnd: random.Random,
    spark_first: bool,
) -> None:
    order = ["spark", "embedded"] if spark_first else ["embedded", "spark"]
    _check(request, order, tmp_path_factory.mktemp("props"), batch, rnd)
