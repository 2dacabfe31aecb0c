"""The cluster tier: a Spark standalone master and two workers from the pyspark install,
and spark-submits built as the DAGs build them
(`ackfold.airflow.spark_jobs.spark_submit_kwargs`, the `spark_default` connection), the
same run on the cluster and in local mode."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ackfold.airflow.connections import spark_connection
from ackfold.airflow.spark_jobs import spark_submit_kwargs
from ackfold.config import Settings, load_settings
from ackfold_dev.cluster import LocalCluster
from tests.conftest import JARS_DIR

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Two workers of one core and 2g; stopped (its whole process group) even on failure."""
    cluster = LocalCluster(tmp_path_factory.mktemp("cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@dataclass
class Submitted:
    """One spark-submit of a `ackfold/jobs/` entry point, running or done."""

    app: str
    settings: Settings
    argv: list[str]
    proc: subprocess.Popen[bytes]
    started: float
    ended: float | None = None

    def done(self) -> bool:
        """Whether it exited (noting when, the first time it is seen to have)."""
        if self.ended is None and self.proc.poll() is not None:
            self.ended = time.monotonic()
        return self.ended is not None

    @property
    def seconds(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def wait(self, timeout: float = 400) -> Submitted:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        self.done()
        return self

    def kill(self) -> None:
        """Kill spark-submit's whole group: its JVM, the Python driver, Python workers."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def log(self, stream: str) -> Path:
        """Where the run's stdout ("out") or stderr ("err") goes: kept for a post-mortem."""
        return self.settings.var_dir / f"spark-submit.{stream}"

    @property
    def stdout(self) -> str:
        return self.log("out").read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.log("err").read_text(errors="replace")

    def result(self) -> dict[str, Any]:
        """The JSON on the last line of stdout (each entry point prints one), or fail with
        the output's end (spark-submit merges the Python driver's stderr into stdout)."""
        self.wait()
        assert self.proc.returncode == 0, (
            f"{self.app} exited {self.proc.returncode} after {self.seconds:.0f} s "
            f"(output in {self.log('out')}):\n{self.stdout[-3000:]}\n{self.stderr[-2000:]}"
        )
        parsed: dict[str, Any] = json.loads(self.stdout.strip().splitlines()[-1])
        return parsed


def submit_argv(app: str, settings: Settings, args: list[str]) -> list[str]:
    """spark-submit's command line as the SparkSubmitOperator builds it from
    `spark_submit_kwargs` and the `spark_default` connection (the provider's
    `_build_spark_submit_command`, for the arguments ackfold sets)."""
    kwargs = spark_submit_kwargs(app, settings, args=args)
    connection = spark_connection(settings)
    argv = [str(VENV_BIN / connection["extra"]["spark-binary"]), "--master", connection["host"]]
    for key, value in kwargs["conf"].items():
        argv += ["--conf", f"{key}={value}"]
    argv += ["--jars", kwargs["jars"], "--name", kwargs["name"]]
    argv += ["--deploy-mode", connection["extra"]["deploy-mode"]]
    return [*argv, kwargs["application"], *kwargs["application_args"]]


def settings_file(var: Path, **overrides: Any) -> tuple[Path, Settings]:
    """An ackfold.yaml for a run's processes, and the same settings here."""
    values = {"var_dir": str(var), "jars_dir": str(JARS_DIR), **overrides}
    var.mkdir(parents=True, exist_ok=True)
    path = var / "ackfold.yaml"
    path.write_text(yaml.safe_dump(values))
    return path, load_settings(**values)


def spark_submit(app: str, config: Path, settings: Settings, args: list[str]) -> Submitted:
    """Start the packaged entry point `<app>` (`ackfold.jobs`) under spark-submit
    with the settings of `config`, in the environment the embedded stack gives its tasks
    (venv on PATH, loopback Spark)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACKFOLD_")}
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        SPARK_LOCAL_IP="127.0.0.1",
        ACKFOLD_CONFIG=str(config),
        GX_ANALYTICS_ENABLED="false",
    )
    argv = submit_argv(app, settings, args)
    logs = {stream: settings.var_dir / f"spark-submit.{stream}" for stream in ("out", "err")}
    with logs["out"].open("w") as out, logs["err"].open("w") as err:
        proc = subprocess.Popen(
            argv, env=env, cwd=config.parent, stdout=out, stderr=err, start_new_session=True
        )
    return Submitted(app, settings, argv, proc, time.monotonic())


def completed_apps(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    return {app["id"]: app for app in cluster.state()["completedapps"]}


def executors_of(cluster: LocalCluster, app_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(worker id, executor) for each executor the workers ran for `app_id`."""
    return [
        (worker["id"], executor)
        for worker in cluster.worker_states()
        for executor in worker["executors"] + worker["finishedexecutors"]
        if executor["appid"] == app_id
    ]


def tasks_finished(cluster: LocalCluster, app_id: str) -> dict[str, int]:
    """Tasks each worker's executors of `app_id` logged as finished, by worker dir."""
    counts = {}
    for n in range(1, cluster.workers + 1):
        logs = cluster.work_dir(n).glob(f"{app_id}/*/stderr")
        counts[f"worker-{n}"] = sum(
            log.read_text(errors="replace").count("Finished task") for log in logs
        )
    return counts
