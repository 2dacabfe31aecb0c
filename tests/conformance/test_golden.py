"""Golden ledgers (invariants 17 and 18): every ledger an earlier ackfold or a contract-v1
producer left on disk, folded on each engine by this ackfold.

Each case under tests/golden/<case>/ is a warehouse as its writer left it (`ledger/`),
what it was written by (`case.json`) and what a fold at the case's fixed `now` must give
(`expected.json`, from the reference fold; `tests/golden/make_cases.py` wrote both). On a
copy of it, each engine reconciles; the embedded one then replays as a dry run and checks
the quality, and Spark does so where its reads of the case's tables differ from every
other case's (`SPARK_READS`); none of them may commit to `roots` or `ack_events`. Then a
stage of today acks what the case's outputs left open, a contract-v1 producer appends with
plain delta-rs, and the next reconcile folds both beside the old roots. A layout added to
the ledger adds its case to `LAYOUTS`, and its folder, in the same change.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from ackfold.config import Settings, load_settings
from ackfold.errors import AckfoldError
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, ROOTS, Ledger
from ackfold.replay.request import ReplayRequest
from ackfold.runs.quality import run_quality
from ackfold.runs.replay import run_replay
from tests.conformance.conftest import Reconcile, read
from tests.conftest import JARS_DIR, PROJECT_DIR
from tests.golden import make_cases

GOLDEN = PROJECT_DIR / "tests" / "golden"
# Every layout of the ledger that some release or producer wrote, and the case that keeps it.
LAYOUTS = {
    "contract v1, written by a producer outside ackfold (no id_scheme)": "contract-v1",
    "roots without id_scheme (ackfold before issue 49)": "pre-i49",
    "roots that gained id_scheme: some files with the column, some without": "gained-id-scheme",
    "root_state before issue 47, its mark kept beside the ledger": "pre-i49",
    "root_state since issue 47, its mark a transaction in it": "i47",
    "root_state partitioned by first_event_date alone (before the repartition)": "ackfold-0.1",
    "_ackfold tuple layout 1 in an output table (ackfold 0.1)": "ackfold-0.1",
    "_ackfold tuple layout 2 in an output table (issue 40)": "spark-pre-i49",
    "the Spark reconcile's mark in its stream's checkpoint (before issue 47)": "spark-pre-i49",
    "deletion vectors enabled, none present": "dv-enabled",
    "deletion vectors present (a Spark DELETE)": "dv-present",
    "declared_outputs and retract_log beside the contract's tables (issue 58)": "i58",
}
# The cases whose tables Spark's replay planner and quality checks read differently from
# the others': contract v1's tables as a producer outside ackfold wrote them (no column
# or table an ackfold added), and a table that lists deletion vectors. The other cases
# differ in what only the reconcile reads (root_state's layout, the marks, tuple layouts,
# `id_scheme` in some of roots' files: no module of ackfold.replay or ackfold.quality
# names the column), and after it the dry run and the checks read the layout it leaves.
# GX on Spark costs tens of seconds a run on 2 cores; both engines' checks agree on every
# outcome in tests/spark/test_quality_conformance.py.
SPARK_READS = {"contract-v1", "dv-enabled"}
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "expected.json").is_file())
# The contract-v1 producer's rows after every ackfold command: what each must end as.
AFTER = {"g-done": "completed", "g-open": "pending", "g-bad": "failed"}


def test_every_layout_has_its_golden_ledger() -> None:
    missing = sorted({case for case in LAYOUTS.values() if case not in CASES})
    assert not missing, f"no golden ledger under {GOLDEN} for {missing}: make_cases.py writes them"
    for case in CASES:
        assert (GOLDEN / case / "ledger" / ROOTS).is_dir(), case
        assert json.loads((GOLDEN / case / "case.json").read_text())["written_by"], case
    unlisted = sorted(set(CASES) - set(LAYOUTS.values()))
    assert not unlisted, f"cases that keep no layout of LAYOUTS: {unlisted}"


def _settings(tmp_path: Path, engine: str) -> Settings:
    return load_settings(
        var_dir=tmp_path / "var", warehouse=str(tmp_path / "warehouse"), jars_dir=JARS_DIR,
        defaults={"timeout": "1h"}, engine={"kind": engine},
        spark={"master": "local[2]", "shuffle_partitions": 2},
        quality={"assets_dir": str(PROJECT_DIR / "var" / "quality" / "assets")},
    )  # fmt: skip


def _versions(ledger: Ledger) -> dict[str, int]:
    return {name: DeltaTable(ledger.path(name)).version() for name in (ROOTS, ACK_EVENTS)}


def _statuses(ledger: Ledger) -> dict[str, str]:
    rows = read(ledger, ROOT_STATE)
    assert len({r["root_id"] for r in rows}) == len(rows), "one root_state row per root"
    return {str(r["root_id"]): r["status"] for r in rows}


@pytest.mark.parametrize("case", CASES)
def test_golden_ledger(
    case: str, engine: str, reconcile: Reconcile, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    expected: dict[str, Any] = json.loads((GOLDEN / case / "expected.json").read_text())
    now = datetime.fromisoformat(expected["now"])
    settings = _settings(tmp_path, engine)
    shutil.copytree(GOLDEN / case / "ledger", settings.table_root)
    ledger = Ledger(settings.table_root)
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    untouched = _versions(ledger)

    def unchanged(command: str) -> None:
        assert _versions(ledger) == untouched, (
            f"{command} committed to roots or ack_events: only the producers write them"
        )

    refusal: dict[str, str] = expected.get("or_refused") or {}
    refused: str | None = None
    try:
        reconcile(settings, now=now)
    except AckfoldError as exc:
        # A case may be refused, where the contract allows it, with the way out named.
        if not refusal or type(exc).__name__ != refusal["error"]:
            raise
        refused = str(exc)
    if refused is not None:
        assert refusal["naming"] in refused, f"the refusal names the way out: {refused}"
        unchanged("the refused reconcile")
        return
    assert _statuses(ledger) == expected["statuses"]
    unchanged("the reconcile")

    if engine == "embedded" or case in SPARK_READS:
        request_ = ReplayRequest(dry_run=True, requested_by="golden")
        dry = run_replay(settings, request_, now=now, spark=spark)
        assert (dry.selected, dry.planned, dry.sent) == (expected["replay_selected"],) * 2 + (0,)
        unchanged("a replay's dry run")
        report = run_quality(settings, spark=spark, now=now)
        assert sorted({r.check for r in report.violations}) == expected["quality_failing"]
        unchanged("the quality checks")
        assert _statuses(ledger) == expected["statuses"], "a dry run and the checks change nothing"

    # A stage of today acks the tuples the case's outputs left open, then a contract-v1
    # producer appends, unchanged, after every ackfold command: plainly where the case's
    # tables are contract v1's; with schema_mode="merge" where an ackfold gave them more
    # columns, as a producer must. One fold of both: the stage's trees complete and the
    # producer's roots fold beside the old ones.
    outputs = json.loads((GOLDEN / case / "case.json").read_text()).get("outputs", {})
    for table, output in outputs.items():
        _consume(tmp_path / "warehouse", table, output, at=now - timedelta(minutes=10))
    statuses = expected["after_stage"] if outputs else expected["statuses"]
    at = now - timedelta(minutes=5)
    merge = make_cases.beyond_v1(GOLDEN / case / "ledger" / ROOTS)
    rows = make_cases.producer_rows(AFTER, at, "after")
    make_cases.write_v1(tmp_path / "warehouse", *rows, merge=merge)
    untouched = _versions(ledger)
    reconcile(settings, now=now)
    unchanged("the reconcile after the stage's acks and the producer's append")
    after = {str(make_cases.producer_id("after", message)): end for message, end in AFTER.items()}
    assert _statuses(ledger) == {**statuses, **after}


def _consume(warehouse: Path, table: str, output: dict[str, Any], *, at: datetime) -> None:
    """A stage of today reads the output `table` an earlier release wrote, in the tuple
    layout the case names, and acks the tuples of `output["unconsumed"]` (by word): their
    events are appended as any producer appends them."""
    from ackfold.track.layout import FIELDS, as_tuple
    from ackfold.track.tracker import Tracker

    rows = DeltaTable(str(warehouse / table)).to_pyarrow_table().to_pylist()
    assert rows, f"{table} is empty"
    assert all(tuple(r["_ackfold"]) == FIELDS[output["layout"]] for r in rows), "its layout"
    stage = Tracker(make_cases.APP, clock=lambda: at)
    for row in rows:
        if row["word"] in output["unconsumed"]:
            stage.ack(as_tuple(row["_ackfold"]), stage=output["stage"])
    merge = make_cases.beyond_v1(warehouse / ACK_EVENTS)
    make_cases.write_v1(warehouse, [], stage.drain(), merge=merge)
