"""ackfold's DAGs, declared by one call in a file of your DAGs folder:

    from ackfold.airflow.dags import ackfold_dags

    globals().update(ackfold_dags())

That gives `ackfold_reconcile`, `ackfold_replay`, `ackfold_manual_replay`,
`ackfold_manual_retract`, `ackfold_quality`, `ackfold_maintenance`, `ackfold_smoke`, and
an `ackfold_app_<app>` for each app with a `dag:` entry (`ackfold.airflow.app_dags`). What
each runs is in its `doc_md` (`ackfold.airflow.dag_docs`); the task bodies are
`ackfold.airflow.tasks`.
A bad setting is the DAG file's import error, which Airflow shows with its reason.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ackfold.airflow import dag_docs
from ackfold.airflow.app_dags import app_dags, reconcile_schedule
from ackfold.airflow.assets import root_state_asset
from ackfold.airflow.defaults import LEDGER_POOL, MANUAL_PRIORITY, default_args, from_next_tick
from ackfold.airflow.params import (
    manual_replay_params,
    manual_retract_params,
    requester,
    validate_manual_conf,
    validate_retract_conf,
)
from ackfold.airflow.spark_jobs import engine_job
from ackfold.airflow.tasks import (
    ledger_metrics,
    maintenance_in_task,
    quality_alerts,
    quality_in_task,
    quality_verdict,
    reconcile_in_task,
    run_automatic_replay,
    run_manual_replay,
    run_manual_retract,
    smoke_in_task,
    state_alerts,
)
from ackfold.config import Settings, load_settings
from ackfold.effects.params import MANUAL_RETRACT_DAG_ID
from ackfold.replay.params import MANUAL_REPLAY_DAG_ID

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow.sdk import DAG

START: Any = datetime(2026, 1, 1, tzinfo=UTC)


def ackfold_dags(settings: Settings | None = None) -> dict[str, DAG]:
    """Every ackfold DAG for `settings` (else `load_settings()`), by DAG id."""
    settings = settings or load_settings()
    dags = [
        reconcile_dag(settings),
        replay_dag(settings),
        manual_replay_dag(settings),
        manual_retract_dag(settings),
        quality_dag(settings),
        maintenance_dag(settings),
        smoke_dag(settings),
    ]
    return {dag.dag_id: dag for dag in dags} | app_dags(settings)


def _dag(
    settings: Settings, dag_id: str, doc: str, schedule: Any, tags: list[str], **options: Any
) -> DAG:
    """What every ackfold DAG is: paused at creation as the deployment says
    (`airflow.paused_at_creation`), no catch-up, tagged `ackfold`, retried with the
    failure hook (`default_args`)."""
    from airflow.sdk import DAG

    return DAG(
        dag_id=dag_id,
        doc_md=doc,
        schedule=schedule,
        catchup=False,
        is_paused_upon_creation=settings.airflow.paused_at_creation,
        default_args=default_args(),
        tags=["ackfold", *tags],
        **options,
    )


def reconcile_dag(settings: Settings) -> DAG:
    from airflow.sdk import task

    with _dag(
        settings,
        "ackfold_reconcile",
        dag_docs.RECONCILE,
        reconcile_schedule(settings),
        ["reconcile"],
        start_date=START,
        max_active_runs=1,
    ) as dag:
        reconcile = engine_job(
            "reconcile",
            "reconcile.py",
            settings,
            reconcile_in_task,
            pool=LEDGER_POOL,
            outlets=[root_state_asset(settings)],
        )

        @task
        def alerts(**context: Any) -> dict[str, object]:
            return state_alerts(context)

        @task
        def metrics(**context: Any) -> dict[str, object]:
            return ledger_metrics(context)

        reconcile >> [alerts(), metrics()]
    return dag


def replay_dag(settings: Settings) -> DAG:
    with _dag(
        settings,
        "ackfold_replay",
        dag_docs.REPLAY,
        [root_state_asset(settings)],
        ["replay"],
        start_date=START,
        max_active_runs=1,
    ) as dag:
        engine_job(
            "replay", "replay.py", settings, run_automatic_replay, args=["--auto"], pool=LEDGER_POOL
        )
    return dag


def manual_replay_dag(settings: Settings) -> DAG:
    return _manual_dag(
        settings, MANUAL_REPLAY_DAG_ID, dag_docs.MANUAL_REPLAY, "replay",
        manual_replay_params(settings), validate_manual_conf, run_manual_replay,
    )  # fmt: skip


def manual_retract_dag(settings: Settings) -> DAG:
    return _manual_dag(
        settings, MANUAL_RETRACT_DAG_ID, dag_docs.MANUAL_RETRACT, "retract",
        manual_retract_params(settings), validate_retract_conf, run_manual_retract,
    )  # fmt: skip


def _manual_dag(
    settings: Settings,
    dag_id: str,
    docs: str,
    verb: str,
    params: dict[str, Any],
    validate_conf: Callable[[dict[str, Any] | None, Settings | None], dict[str, Any]],
    run: Callable[[dict[str, Any], str, Settings | None], dict[str, Any]],
) -> DAG:
    """A DAG a user triggers with a form (`params`): `validate` checks the conf and fails
    at once on a bad one, then the task named `verb` runs it in the ledger's pool, as the
    user who triggered the run."""
    from airflow.sdk import get_current_context, task

    with _dag(settings, dag_id, docs, None, [verb], start_date=START, params=params) as dag:

        @task(priority_weight=MANUAL_PRIORITY, weight_rule="absolute")
        def validate() -> dict[str, Any]:
            return validate_conf(get_current_context()["dag_run"].conf, settings)

        @task(task_id=verb, pool=LEDGER_POOL, priority_weight=MANUAL_PRIORITY,
              weight_rule="absolute")  # fmt: skip
        def act(conf: Any) -> dict[str, Any]:  # the validated conf (XCom)
            return run(conf, requester(get_current_context()["dag_run"]), settings)

        act(validate())
    return dag


def quality_dag(settings: Settings) -> DAG:
    from airflow.sdk import get_current_context, task

    with _dag(
        settings,
        "ackfold_quality",
        dag_docs.QUALITY,
        [root_state_asset(settings)],
        ["quality"],
        start_date=START,
        max_active_runs=1,
    ) as dag:
        # In the task's process, or the packaged `quality.py`: the same `run_quality`.
        check = engine_job(
            "check",
            "quality.py",
            settings,
            quality_in_task,
            args=["--airflow-run-id", "{{ run_id }}"],
        )

        @task
        def verdict() -> dict[str, object]:
            return quality_verdict(get_current_context()["run_id"])

        # Beside the verdict, not after it: a failed verdict stays a leaf and fails the
        # run. After the check however it ended (a check that wrote nothing changes no
        # alert).
        @task(trigger_rule="all_done")
        def alerts(**context: Any) -> dict[str, object]:
            return quality_alerts(context)

        check >> [verdict(), alerts()]
    return dag


def maintenance_dag(settings: Settings) -> DAG:
    with _dag(
        settings,
        "ackfold_maintenance",
        dag_docs.MAINTENANCE,
        from_next_tick(settings.airflow.maintenance_schedule),
        ["maintenance"],
        max_active_runs=1,
    ) as dag:
        engine_job("maintain", "maintenance.py", settings, maintenance_in_task, pool=LEDGER_POOL)
    return dag


def smoke_dag(settings: Settings) -> DAG:
    with _dag(
        settings, "ackfold_smoke", dag_docs.SMOKE, "@once", ["smoke"], start_date=START
    ) as dag:
        engine_job("delta_round_trip", "smoke.py", settings, smoke_in_task)
    return dag
