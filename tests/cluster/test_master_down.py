"""A `spark://` master that is down: a clear error naming spark.master, at once, where
Spark alone retries for a minute and then prints pages of stack traces."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from ackfold_dev.ports import free_port, port_held
from tests.cluster.conftest import VENV_BIN, settings_file, spark_submit
from tests.cluster.ledger import write_ledger
from tests.conftest import JARS_DIR


def test_ackfold_reconcile_names_spark_master_when_the_master_is_down(tmp_path: Path) -> None:
    write_ledger(tmp_path / "warehouse", roots=10)
    port = free_port()
    down = f"spark://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACKFOLD_")}
    env.update(
        ACKFOLD_VAR_DIR=str(tmp_path),
        ACKFOLD_JARS_DIR=str(JARS_DIR),
        ACKFOLD_SPARK__MASTER=down,
        ACKFOLD_ENGINE__KIND="spark",  # the Spark engine's start; the embedded one needs none
    )
    started = time.monotonic()
    with port_held(port):
        result = subprocess.run(
            [str(VENV_BIN / "ackfold"), "reconcile"],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    seconds = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"ackfold: spark.master is {down} (ACKFOLD_SPARK__MASTER)")
    assert "no Spark master answers" in result.stderr
    assert "make cluster" in result.stderr
    assert "Traceback" not in result.stderr
    assert seconds < 20, f"no JVM, no retries: {seconds:.0f} s"


def test_spark_submit_to_a_master_that_is_down_fails_fast_naming_spark_master(
    tmp_path: Path,
) -> None:
    write_ledger(tmp_path / "warehouse", roots=10)
    port = free_port()
    down = f"spark://127.0.0.1:{port}"
    config, settings = settings_file(tmp_path, spark={"master": down})
    with port_held(port):
        run = spark_submit("reconcile.py", config, settings, []).wait(timeout=120)
    assert run.proc.returncode != 0
    last = run.stdout.strip().splitlines()[-1]
    # The entry point's one line (`ackfold.jobs.one_line_errors`), not a traceback.
    assert last.startswith(f"ackfold: spark.master is {down}"), run.stdout[-2000:]
    # Spark's own way: a minute of retries ("All masters are unresponsive! Giving up.").
    assert run.seconds < 45, f"{run.seconds:.0f} s"
    assert "All masters are unresponsive" not in run.stderr
