"""bench/microbatches.py's plain-Python parts: the CPU of a process tree, and the median
micro-batch. (What it reads from Spark runs in the tiny run of bench/wordcount.py.)"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import PROJECT_DIR

sys.path.insert(0, str(PROJECT_DIR / "bench"))
from microbatches import median_batch, tree_cpu_seconds

BURN = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n"


def test_the_tree_counts_a_live_child_and_an_ended_one() -> None:
    """CPU of processes under this one counts, whether they still run (their own time) or
    ended and were waited for (the parent's `cutime`): a PySpark driver's JVM and its
    Python workers are either."""
    start = tree_cpu_seconds()
    subprocess.run([sys.executable, "-c", BURN], check=True)  # ended, waited for
    ended = tree_cpu_seconds()
    assert ended - start >= 0.5
    live = subprocess.Popen(
        [sys.executable, "-c", BURN + "print('burnt', flush=True)\ntime.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert live.stdout is not None
        assert live.stdout.readline().strip() == "burnt"
        assert tree_cpu_seconds() - ended >= 0.5
        assert tree_cpu_seconds(live.pid) >= 0.5  # the child's tree alone
    finally:
        live.kill()
        live.wait()


def test_the_median_micro_batch_takes_each_figure_s_median_for_one_stage() -> None:
    batches = [
        {"stage": "split", "batch_id": 0, "rows": 10, "addBatch": 900},
        {"stage": "split", "batch_id": 1, "rows": 10, "addBatch": 100},
        {"stage": "split", "batch_id": 2, "rows": 4, "addBatch": 300},
        {"stage": "count", "batch_id": 0, "rows": 200, "addBatch": 5},
    ]
    assert median_batch(batches, "split") == {"rows": 10, "addBatch": 300}
    assert median_batch(batches, "count") == {"rows": 200, "addBatch": 5}
    assert median_batch(batches, "other") == {}
