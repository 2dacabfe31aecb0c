"""Local or cluster with one setting, `spark.master`: what ackfold gives Spark on each
master (the executors' Python), the pre-flight check of a `spark://` master, and the local
cluster's arguments. No JVM starts here."""

from __future__ import annotations

import doctest
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ackfold.cli import main as cli
from ackfold.config import Settings
from ackfold.spark.conf import spark_conf
from ackfold.spark.python import worker_python, workers_run
from ackfold.spark.session import (
    SparkMasterUnreachable,
    check_master,
    get_spark,
    master_addresses,
)
from ackfold_dev import ports
from ackfold_dev.cluster import ClusterError, LocalCluster


def test_docstring_examples_run() -> None:
    # Not the whole of ackfold.spark: its module example starts a JVM.
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for test in finder.find(master_addresses, globs={"master_addresses": master_addresses}):
        runner.run(test)
    assert runner.failures == 0
    assert runner.tries > 0
    assert doctest.testmod(ports).failed == 0


def test_master_addresses_of_standalone_urls() -> None:
    assert master_addresses("spark://h:7077") == [("h", 7077)]
    assert master_addresses("spark://a:1,b:2") == [("a", 1), ("b", 2)]
    assert master_addresses("spark://h") == [("h", 7077)], "Spark's default port"
    assert master_addresses("spark://[::1]:7077") == [("::1", 7077)]
    for other in ("local[*]", "yarn", "k8s://https://api:6443"):
        assert master_addresses(other) == []


@pytest.mark.parametrize("master", ["local[*]", "local[2]", "spark://10.0.0.5:7077"])
def test_executors_run_this_python_on_local_and_standalone_masters(
    master: str, make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    settings = make_settings(spark={"master": master})
    assert worker_python(settings) == sys.executable
    assert spark_conf(settings, with_jars=False)["spark.pyspark.python"] == sys.executable


@pytest.mark.parametrize("master", ["yarn", "k8s://https://api:6443"])
def test_yarn_and_kubernetes_nodes_keep_their_python(
    master: str, make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    settings = make_settings(spark={"master": master})
    assert "spark.pyspark.python" not in spark_conf(settings, with_jars=False)
    chosen = make_settings(spark={"master": master, "python": "/opt/venv/bin/python"})
    assert spark_conf(chosen, with_jars=False)["spark.pyspark.python"] == "/opt/venv/bin/python"


def test_spark_python_and_pyspark_python_choose_the_executors_python(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    master = {"master": "spark://10.0.0.5:7077"}
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3.11")
    assert "spark.pyspark.python" not in spark_conf(make_settings(spark=master), with_jars=False)
    chosen = make_settings(spark={**master, "python": "/opt/venv/bin/python"})
    assert spark_conf(chosen, with_jars=False)["spark.pyspark.python"] == "/opt/venv/bin/python"
    forced = make_settings(spark={**master, "conf": {"spark.pyspark.python": "/x/python"}})
    assert spark_conf(forced, with_jars=False)["spark.pyspark.python"] == "/x/python"


def test_a_listening_master_passes_the_check() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        check_master(f"spark://127.0.0.1:{port}")
        # With standbys, one answering master is enough.
        check_master(f"spark://127.0.0.1:{ports.free_port()},127.0.0.1:{port}")
    check_master("local[*]")
    check_master("yarn")


def test_a_master_that_is_down_fails_at_once_naming_the_setting() -> None:
    down = f"spark://127.0.0.1:{ports.free_port()}"
    started = time.monotonic()
    with pytest.raises(SparkMasterUnreachable) as caught:
        check_master(down)
    assert time.monotonic() - started < 2
    message = str(caught.value)
    assert message.startswith(f"spark.master is {down} (ACKFOLD_SPARK__MASTER)")
    assert "Connection refused" in message
    assert "make cluster" in message


def test_get_spark_checks_the_master_before_it_starts_a_jvm(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import SparkSession

    def no_jvm(*args: object) -> None:
        raise AssertionError("no JVM for a master that is down")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", no_jvm)
    settings = make_settings(spark={"master": f"spark://127.0.0.1:{ports.free_port()}"})
    with pytest.raises(SparkMasterUnreachable):
        get_spark(settings)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 0}, "at least one worker"),
        ({"cores": 0}, "at least one worker of at least one core"),
        ({"memory": "2 GB"}, "not like 1g or 1536m"),
    ],
)
def test_the_local_cluster_refuses_bad_sizes(
    kwargs: dict[str, object], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ClusterError, match=message):
        LocalCluster(tmp_path, **kwargs)  # type: ignore[arg-type]


def test_a_taken_port_is_refused_before_any_daemon_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = LocalCluster(tmp_path, port=port)
        with pytest.raises(ClusterError, match=f"port {port} on 127.0.0.1 is already taken"):
            cluster.start()
        assert cluster.pid is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "--workers must be a whole number of at least 1"),
        (["--port", "x"], "--port must be a whole number"),
        (["--webui-port", "70000"], "--webui-port must be a port number, 1 to 65535"),
        (["--memory", "lots"], "worker memory 'lots' is not like 1g or 1536m"),
    ],
)
def test_ackfold_cluster_refuses_bad_flags(
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path))
    assert cli.run(["cluster", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("existing", "calls", "said"),
    [
        (None, ["add"], "created connection spark_default -> spark://h:7077"),
        ("local[*]", ["delete", "add"], "pointed connection spark_default at spark.master"),
        ("spark://h:7077", [], None),
    ],
)
def test_make_run_points_spark_default_at_spark_master(
    existing: str | None,
    calls: list[str],
    said: str | None,
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A `make run` after a switch of spark.master: the DAGs' connection follows it."""
    import json
    import subprocess

    from ackfold_dev import stack

    made: list[str] = []

    def airflow(env: object, *args: str) -> subprocess.CompletedProcess[str]:
        if args[:2] == ("connections", "get"):
            found = [{"conn_id": "spark_default", "host": existing}] if existing else []
            return subprocess.CompletedProcess(args, 0 if found else 1, json.dumps(found), "")
        if args[0] == "connections":
            made.append(args[1])
            if args[1] == "add":
                assert json.loads(args[-1])["host"] == "spark://h:7077"
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(stack, "_airflow", airflow)
    lines: list[str] = []
    stack.prepare_airflow(make_settings(spark={"master": "spark://h:7077"}), {}, lines.append)
    assert made == calls
    if said:
        assert said in lines[-1]
    else:
        assert len(lines) == 1, "nothing to do after the migration"


def test_a_worker_python_of_another_version_is_refused_before_spark_starts(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ackfold.spark.python import WorkerPythonMismatch, check_worker_python
    from tests.suite import find_python

    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    versions = [v for v in ("3.11", "3.12", "3.13", "3.10") if v != mine]
    other = next((p for v in versions if (p := find_python(v))), None)
    if other is None:
        pytest.skip(f"no Python but {mine} on PATH or in pyenv")
    monkeypatch.setenv("PYSPARK_PYTHON", other)
    with pytest.raises(WorkerPythonMismatch, match=r"PYSPARK_PYTHON is .*the driver's version"):
        check_worker_python(make_settings())
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    check_worker_python(make_settings())  # the same interpreter: nothing to say
    monkeypatch.delenv("PYSPARK_PYTHON")
    with pytest.raises(WorkerPythonMismatch, match="spark.python is /nowhere/python"):
        check_worker_python(make_settings(spark={"python": "/nowhere/python"}))


def test_the_workers_python_is_set_only_while_spark_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PySpark reads PYSPARK_PYTHON when its context starts; processes started later (a
    virtualenv of another Python, spark-submit) must not inherit this driver's choice."""
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    with workers_run("/opt/python3.12/bin/python"):
        assert os.environ["PYSPARK_PYTHON"] == "/opt/python3.12/bin/python"
    assert "PYSPARK_PYTHON" not in os.environ
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    with workers_run("/opt/python3.12/bin/python"):
        pass
    assert os.environ["PYSPARK_PYTHON"] == "/usr/bin/python3"
