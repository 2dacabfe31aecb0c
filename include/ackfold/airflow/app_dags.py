"""The tracked apps as Airflow DAGs: one `ackfold_app_<app>` for each app with a `dag:`
entry under `apps:` (`ackfold.config.policy.AppDag`), declared with the others by `ackfold_dags()`
(`ackfold.airflow.dags`).

A run spark-submits the app on `spark_default` (through Spark Connect with
`spark.remote` set), and the app takes what its source holds and stops: the batch-replay
style of `trigger(availableNow=True)`, so a schedule decides how fresh the results are
and no cluster sits idle between runs. The run's driver gets `ACKFOLD_APP=<app>`: a
session it makes with `ackfold.spark.get_spark` records the app's heartbeat. A run that
ends well updates the app's asset, `ackfold_app_<app>`; `ackfold_reconcile` is scheduled
on its cron *or* any of those assets, so the events a run wrote are folded right after
it, and the replay follows.
A file that is missing, or an application spark-submit cannot take, is that app's
error: its DAG still appears, says what is wrong in its docs, and its `run` task fails
with the reason; the other DAGs of the file load as ever. (A setting that does not
validate at all is still the DAG file's import error.) The jars are resolved when a run
starts, not when the DAG file is parsed (`ackfold.airflow.spark_submit`).

With `apps.<app>.dag.mode: continuous` the app runs as one long supervised task instead
(`@continuous`, restarted with backoff when it fails), and `ackfold_reconcile` keeps its
own schedule for it.

Airflow is imported inside the functions: the CLI imports the configuration this reads.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ackfold.airflow.assets import app_asset
from ackfold.airflow.defaults import default_args, from_next_tick
from ackfold.airflow.spark_jobs import is_uri, spark_job
from ackfold.config import Settings
from ackfold.config.policy import AppDag
from ackfold.config.settings import config_file
from ackfold.config.values import APP_DAG_PREFIX

if TYPE_CHECKING:
    from airflow.sdk import DAG

CONTINUOUS: Final = "continuous"
# A supervised app is restarted for as long as it fails (Airflow needs a number).
CONTINUOUS_RETRIES: Final = 100_000
# `@continuous` needs a start date; the run starts as soon as the DAG appears.
CONTINUOUS_START: Final = datetime(2026, 1, 1, tzinfo=UTC)


def app_dag_specs(settings: Settings) -> dict[str, AppDag]:
    """The apps that have a DAG, by name, with what their `dag:` entry says."""
    return {name: app.dag for name, app in sorted(settings.apps.items()) if app.dag is not None}


def application_path(app: str, spec: AppDag, settings: Settings) -> str:
    """The app's entry point: a URI (`s3a://`, `local:`, ...) as it is, for spark-submit
    to fetch; else a file, a relative path taken from the directory of the configuration
    file (`ACKFOLD_CONFIG`, else `./ackfold.yaml`), or from the working directory without
    one. A file that is not there (or a URI under Spark Connect, where the task runs the
    file itself) is a clear `ValueError`, which the app's own `run` task raises."""
    if is_uri(spec.application):
        if settings.spark.remote:
            raise ValueError(
                f"apps.{app}.dag.application: with spark.remote set, the app runs in the "
                f"task's own process, so it must be a file, not {spec.application!r}"
            )
        return spec.application
    config = config_file()
    base = config.resolve().parent if config is not None else Path.cwd()
    path = Path(spec.application).expanduser()
    path = path if path.is_absolute() else base / path
    if not path.is_file():
        raise ValueError(
            f"apps.{app}.dag.application: no file {str(path)!r} on this host (a relative "
            f"path is taken from {str(base)!r})"
        )
    return str(path)


def app_dags(settings: Settings) -> dict[str, DAG]:
    """One DAG per app with a `dag:` entry, by DAG id."""
    return {
        f"{APP_DAG_PREFIX}{name}": _app_dag(name, spec, settings)
        for name, spec in app_dag_specs(settings).items()
    }


def _app_dag(app: str, spec: AppDag, settings: Settings) -> DAG:
    from airflow.sdk import DAG

    try:
        application, problem = application_path(app, spec, settings), None
    except ValueError as exc:
        # This app's own error, in its own task: the other DAGs of the file still load.
        application, problem = spec.application, str(exc)
    broken = f"\n**Broken**: {problem}\n" if problem else ""
    if spec.mode == CONTINUOUS:
        return _continuous_dag(app, spec, settings, application, problem)
    with DAG(
        dag_id=f"{APP_DAG_PREFIX}{app}",
        doc_md=f"""
### ackfold app `{app}`
Runs the tracked app `{app}` (`{application}`) until it has taken what its source holds,
then stops (`availableNow`).
{broken}
- **Runs** on `apps.{app}.dag.schedule` (`{spec.schedule}`), one run at a time, so its
  streaming checkpoint has one writer. Trigger it by hand to drain the source now.
- `run` submits the app on `spark_default` with `apps.{app}.dag.args`; its log is the
  app's driver log.
- A run that ends well updates the `{APP_DAG_PREFIX}{app}` asset, which triggers
  `ackfold_reconcile`: its events are folded right after, and its failed roots go to
  the replay.
""",
        schedule=from_next_tick(spec.schedule),
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=settings.airflow.paused_at_creation,
        default_args={
            **default_args(),
            "owner": spec.owner,
            **({"execution_timeout": spec.execution_timeout} if spec.execution_timeout else {}),
        },
        tags=["ackfold", "app", *spec.tags],
    ) as dag:
        spark_job(
            "run",
            application,
            settings,
            args=list(spec.args),
            tracked=app,
            problem=problem,
            outlets=[app_asset(app)],
        )
    return dag


def _continuous_dag(
    app: str, spec: AppDag, settings: Settings, application: str, problem: str | None
) -> DAG:
    """`apps.<app>.dag.mode: continuous`: the app as one long task, always one run, its
    failures retried with a doubling backoff without end (`problem`: what is wrong with
    its configuration, which its task raises)."""
    from airflow.sdk import DAG

    broken = f"\n**Broken**: {problem}\n" if problem else ""
    with DAG(
        dag_id=f"{APP_DAG_PREFIX}{app}",
        doc_md=f"""
### ackfold app `{app}` (continuous)
Runs the tracked app `{app}` (`{application} --continuous`) as one long task: its queries
run on their triggers until it fails or is stopped.
{broken}
- **Runs** `@continuous`, one run at a time: when a run ends, the next starts.
- A failed try (the driver killed, a query failed) is **restarted** after
  `apps.{app}.dag.restart_backoff` (`{spec.restart_backoff}`), doubling up to
  `max_restart_delay` (`{spec.max_restart_delay}`), without end. The app resumes from
  its checkpoints: nothing is lost, and its heartbeat (`app_progress`) shows it alive
  again on the app's page.
- `ackfold_reconcile` keeps its own schedule (`airflow.reconcile_schedule`) for it.
""",
        schedule="@continuous",
        start_date=CONTINUOUS_START,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=settings.airflow.paused_at_creation,
        default_args={
            **default_args(),
            "owner": spec.owner,
            "retries": CONTINUOUS_RETRIES,
            "retry_delay": spec.restart_backoff,
            "retry_exponential_backoff": True,
            "max_retry_delay": spec.max_restart_delay,
            **({"execution_timeout": spec.execution_timeout} if spec.execution_timeout else {}),
        },
        tags=["ackfold", "app", "continuous", *spec.tags],
    ) as dag:
        spark_job(
            "run", application, settings, args=[*spec.args, "--continuous"], tracked=app,
            problem=problem,
        )  # fmt: skip
    return dag


def reconcile_schedule(settings: Settings) -> Any:
    """When `ackfold_reconcile` runs: on `airflow.reconcile_schedule`, and also after any
    `available_now` app DAG's successful run (its asset), when there are such DAGs."""
    apps = {name: spec for name, spec in app_dag_specs(settings).items() if spec.mode != CONTINUOUS}
    if not apps:
        return settings.airflow.reconcile_schedule
    from airflow.sdk import AssetAny

    from ackfold.airflow.compat import asset_or_time_schedule, cron_trigger_timetable

    return asset_or_time_schedule()(
        timetable=cron_trigger_timetable()(settings.airflow.reconcile_schedule, timezone="UTC"),
        assets=AssetAny(*(app_asset(app) for app in apps)),
    )
