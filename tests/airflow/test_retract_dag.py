"""`ackfold_manual_retract`, run with `dag.test()` on a ledger written by delta-rs (no JVM):
two dead letters of `orders` that left rows in a declared output, a completed root that
did too, and one dead letter that left none. A dry run (the default) shows and deletes
nothing; a run with `dry_run` off deletes exactly the dead letters' rows, in one commit,
and the audit log names the user who triggered it; a bad conf and a refused root fail
without retries."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ackfold.config import Settings, load_settings
from ackfold.effects.outputs import declare_output
from ackfold.ledger.schema import status
from ackfold.ledger.schema.ids import format_id
from ackfold.ledger.schema.tables import RETRACT_LOG
from tests.airflow.conftest import SETTINGS
from tests.airflow.test_reconcile_replay_dags import _return_value
from tests.conftest import JARS_DIR
from tests.replay_ledger import Failed, read_table, write_failed

DEAD = [Failed(1, status=status.DEAD_LETTERED, attempt=5),
        Failed(2, status=status.DEAD_LETTERED, attempt=5)]  # fmt: skip
NOTHING_LEFT = Failed(3, status=status.DEAD_LETTERED, attempt=5)
DONE = Failed(4, status=status.COMPLETED)
# Rows per origin in the output: each dead letter got part-way; the completed root all.
ROWS = {DEAD[0].origin: 3, DEAD[1].origin: 2, DONE.origin: 4}


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[Settings, str]:
    """The ledger and its one declared output (`lines`), written by delta-rs."""
    import pyarrow as pa
    from deltalake import write_deltalake

    settings = load_settings(
        var_dir=tmp_path / "var", jars_dir=JARS_DIR, apps={"orders": {"stages": ["work"]}}
    )
    write_failed(settings.table_root, [*DEAD, NOTHING_LEFT, DONE])
    output = f"{settings.table_root}/lines"
    rows = [(origin, i) for origin, n in ROWS.items() for i in range(n)]
    write_deltalake(output, pa.table({
        "origin_root_id": pa.array([o for o, _ in rows], pa.int64()),
        "position": pa.array([p for _, p in rows], pa.int32()),
    }))  # fmt: skip
    declare_output(settings.table_root, "orders", output)
    return settings, output


def _dag(settings: Settings) -> Any:
    from ackfold.airflow.dags import manual_retract_dag

    return manual_retract_dag(settings)


def _origins(output: str) -> dict[int, int]:
    from collections import Counter

    from deltalake import DeltaTable

    table = DeltaTable(output).to_pyarrow_table(columns=["origin_root_id"])
    return dict(Counter(table["origin_root_id"].to_pylist()))


def _version(output: str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(output).version()


def test_a_dry_run_by_default_shows_the_dead_letters_rows_and_deletes_nothing(
    ledger: tuple[Settings, str],
) -> None:
    from airflow.utils.state import DagRunState

    settings, output = ledger
    run = _dag(settings).test(run_conf={"app": "orders"})
    assert run.state == DagRunState.SUCCESS
    summary = _return_value(run, "retract")
    assert summary["dry_run"] is True
    assert summary["requested_by"] == "airflow:dag_test"  # who triggered (dag.test's user)
    assert summary["to_delete"] == {output: 5}
    assert summary["deleted"] == {}
    by_root = {r["root_id"]: r["rows"] for r in summary["roots"]}
    assert by_root == {format_id(DEAD[0].root_id): 3, format_id(DEAD[1].root_id): 2,
                       format_id(NOTHING_LEFT.root_id): 0}  # fmt: skip
    assert _origins(output) == ROWS, "a dry run deletes nothing"
    assert _version(output) == 0


def test_a_run_deletes_the_dead_letters_rows_in_one_commit_and_logs_who_asked(
    ledger: tuple[Settings, str],
) -> None:
    from airflow.utils.state import DagRunState

    settings, output = ledger
    conf = {"root_ids": [format_id(DEAD[0].root_id), str(DEAD[1].root_id)], "dry_run": False}
    run = _dag(settings).test(run_conf=conf)
    assert run.state == DagRunState.SUCCESS
    summary = _return_value(run, "retract")
    assert summary["dry_run"] is False
    assert summary["deleted"] == {output: 5}
    assert summary["retract_id"]
    # Only the completed root's rows are left, and the delete was one commit.
    assert _origins(output) == {DONE.origin: 4}
    assert _version(output) == 1
    # Written ahead, then confirmed: the user who triggered, each dead letter's rows.
    log = read_table(settings.table_root, RETRACT_LOG)
    assert {r["requested_by"] for r in log} == {"airflow:dag_test"}
    assert {r["retract_id"] for r in log} == {summary["retract_id"]}
    planned = {r["root_id"]: r["row_count"] for r in log if r["event"] == "planned"}
    deleted = {r["root_id"] for r in log if r["event"] == "deleted"}
    assert planned == {DEAD[0].root_id: 3, DEAD[1].root_id: 2}
    assert deleted == {DEAD[0].root_id, DEAD[1].root_id}


def test_a_root_that_is_no_dead_letter_is_refused_without_retries_and_nothing_goes(
    ledger: tuple[Settings, str], caplog: pytest.LogCaptureFixture
) -> None:
    from airflow.utils.state import DagRunState

    settings, output = ledger
    conf = {"root_ids": [format_id(DEAD[0].root_id), format_id(DONE.root_id)], "dry_run": False}
    with caplog.at_level(logging.ERROR, logger="ackfold.airflow"):
        run = _dag(settings).test(run_conf=conf)
    assert run.state == DagRunState.FAILED
    (ti,) = [ti for ti in run.get_task_instances() if ti.task_id == "retract"]
    assert ti.try_number == 1, "a refusal will not get better: not retried"
    assert any(format_id(DONE.root_id) in r.getMessage() for r in caplog.records), [
        r.getMessage() for r in caplog.records
    ]
    assert _origins(output) == ROWS
    assert _version(output) == 0


def test_a_bad_conf_fails_validation_naming_each_field(ledger: tuple[Settings, str]) -> None:
    from airflow.utils.state import DagRunState, TaskInstanceState

    settings, output = ledger
    # `statuses` and `rate` are the replay's; `dry_run` off with nothing to narrow it.
    run = _dag(settings).test(run_conf={"statuses": ["failed"], "rate": 5})
    assert run.state == DagRunState.FAILED
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {
        "validate": TaskInstanceState.FAILED, "retract": TaskInstanceState.UPSTREAM_FAILED
    }  # fmt: skip
    (ti,) = [ti for ti in run.get_task_instances() if ti.task_id == "validate"]
    assert ti.try_number == 1
    run = _dag(settings).test(run_conf={"dry_run": False})
    assert run.state == DagRunState.FAILED, "deleting every dead letter of every app needs a limit"
    assert _origins(output) == ROWS


def test_the_retract_form_is_the_replays_selection_and_a_dry_run_by_default() -> None:
    from airflow.sdk.exceptions import ParamValidationError

    from ackfold.effects.params import RETRACT_CONF_KEYS, parse_retract_conf

    params = _dag(SETTINGS).params
    assert tuple(params) == RETRACT_CONF_KEYS
    assert params.get_param("dry_run").value is True
    form = {key: params.get_param(key).value for key in RETRACT_CONF_KEYS}
    apps = list(SETTINGS.apps)
    assert parse_retract_conf(form, apps=apps) == parse_retract_conf({}, apps=apps)
    for key in RETRACT_CONF_KEYS:
        assert params.get_param(key).schema.get("title"), key
        assert params.get_param(key).description, key
    for key, bad in (("root_ids", ["12xyz"]), ("root_ids", [42]), ("limit", 0),
                     ("app", "nope")):  # fmt: skip
        with pytest.raises(ParamValidationError):
            params.get_param(key).resolve(bad)
