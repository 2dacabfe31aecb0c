"""The reconciler and the word-count app on a real Spark standalone cluster (a master and
two workers), submitted as the DAGs submit them: the reconciler gives what it gives in
local mode, the word count loses nothing and counts exactly; and both really ran on the
workers' executors.

Three spark-submits: the reconcile on the cluster and with `local[2]`, compared row by
row; and the word count on the cluster, whose report and counts are checked against the
sentences it sent (the e2e tier runs the same demo in local mode). The cluster gives all
its cores to one application at a time, so its two runs go one after the other; the local
run goes alongside (most of a run is waiting: JVM start, Delta commits, SQS polls).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from deltalake import DeltaTable

from ackfold.ledger.schema.tables import DEAD_LETTERS, ROOT_STATE, UNMATCHED_EVENTS, Ledger
from ackfold_dev.cluster import LocalCluster
from ackfold_dev.elasticmq import ElasticMQ
from tests.cluster.conftest import (
    Submitted,
    completed_apps,
    executors_of,
    settings_file,
    spark_submit,
    tasks_finished,
)
from tests.cluster.ledger import NOW, write_ledger
from tests.sqs.conftest import sqs_server  # noqa: F401

LOCAL = "local[2]"
# The runs take about 5 minutes beside the other tiers on 2 cores, and twice that on
# a slower machine: the runs have RUNS_WAIT, and the first test, which waits for them, more.
RUNS_WAIT = 1500
pytestmark = pytest.mark.timeout(RUNS_WAIT + 300)
MESSAGES = 200
# No configured faults (`--no-faults`), then these: drops and fails that replays repair,
# poison that two attempts dead-letter, and the count query killed once mid-batch.
WORDCOUNT_FLAGS = [
    "--no-faults", "--messages", str(MESSAGES), "--seed", "10", "--drop", "split=0.05",
    "--fail", "split=0.03", "--poison", "2", "--kill", "count",
]  # fmt: skip
# Short runs on 2 cores, the same for both modes: the JVMs' C1 compiler alone is enough,
# for 40% less CPU than C1 and C2 (a local reconcile here: 57 CPU-s, 34 with C1 alone);
# and one shuffle partition per executor core. C1 alone gets a 48 MB code cache, which the
# local-mode word count (driver and executor in one JVM) filled once: "Out of space in
# CodeCache", the run dead. 128 MB leaves room.
JVM = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=128m"
SPARK = {
    "shuffle_partitions": 2,
    "conf": {"spark.driver.extraJavaOptions": JVM, "spark.executor.extraJavaOptions": JVM},
}

Runs = dict[str, dict[str, Submitted]]


@pytest.fixture(scope="module")
def runs(
    cluster: LocalCluster,
    sqs_server: ElasticMQ,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Runs, set[str], int]]:
    """Every run, done: {"reconcile": {"cluster"|"local": run}, "wordcount": {"cluster":
    run}}, the cluster's applications before them, and the events in the reconciled
    ledger."""
    base = tmp_path_factory.mktemp("runs")
    events = write_ledger(base / "ledger")
    before = set(completed_apps(cluster))
    started: list[Submitted] = []

    def start(kind: str, name: str) -> Submitted:
        spark = {**SPARK, "master": cluster.master_url if name == "cluster" else LOCAL}
        var = base / kind / name
        if kind == "reconcile":
            shutil.copytree(base / "ledger", var / "warehouse")
            config, settings = settings_file(var, spark=spark)
            run = spark_submit("reconcile.py", config, settings, ["--now", NOW.isoformat()])
        else:
            config, settings = settings_file(
                var,
                spark=spark,
                sqs={"endpoint_url": sqs_server.endpoint_url, "wait_time": "1s"},
                # A short timeout: dropped sentences are replayed sooner. Two attempts
                # dead-letter the poison in two cycles, and with seed 10 nothing else
                # is hit on both attempts.
                apps={"wordcount": {
                    "source_queue": f"sentences-{name}-{uuid.uuid4().hex[:8]}",
                    "timeout": "4s", "max_attempts": 2,
                }},
            )  # fmt: skip
            run = spark_submit("wordcount.py", config, settings, WORDCOUNT_FLAGS)
        started.append(run)
        return run

    try:
        done: Runs = {"reconcile": {}, "wordcount": {}}
        done["reconcile"]["cluster"] = start("reconcile", "cluster")
        done["reconcile"]["local"] = start("reconcile", "local")
        deadline = time.monotonic() + RUNS_WAIT
        while len(started) < 3 or not all(run.done() for run in started):
            if time.monotonic() > deadline:
                break
            if "cluster" not in done["wordcount"] and done["reconcile"]["cluster"].done():
                done["wordcount"]["cluster"] = start("wordcount", "cluster")
            time.sleep(0.5)
        for run in started:
            if not run.done():
                run.kill()  # out of time: its test fails with its output
        assert len(started) == 3, "the cluster reconcile never ended: the word count never ran"
        for kind, by_mode in done.items():  # shown with -s: the tier's budget
            print(", ".join(f"{kind} on {m}: {r.seconds:.0f} s" for m, r in by_mode.items()))
        yield done, before, events
    finally:
        for run in started:
            run.kill()


def _rows(warehouse: str, table: str) -> list[dict[str, Any]]:
    rows = DeltaTable(Ledger(warehouse).path(table)).to_pyarrow_table().to_pylist()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, list):
                row[key] = sorted(value)  # sets kept as arrays: their order means nothing
    return rows


def _ran_on_the_workers(cluster: LocalCluster, before: set[str], run: Submitted) -> None:
    """`run` made one application on the cluster; each worker ran an executor for it, and
    both executors finished tasks of it."""
    name = run.argv[run.argv.index("--name") + 1]
    mine = [
        (app_id, app)
        for app_id, app in completed_apps(cluster).items()
        if app_id not in before and app["name"] == name
    ]
    assert len(mine) == 1, f"one finished application {name} on the cluster: {mine}"
    app_id, app = mine[0]
    assert app["state"] == "FINISHED"
    assert app["cores"] == cluster.workers, "a core of each worker"
    workers = {worker for worker, _ in executors_of(cluster, app_id)}
    assert len(workers) == cluster.workers, "an executor on each worker"
    finished = tasks_finished(cluster, app_id)
    assert all(finished.values()), f"tasks finished on each worker: {finished}"


def test_reconcile_on_the_cluster_gives_the_root_state_of_local_mode(
    runs: tuple[Runs, set[str], int], cluster: LocalCluster
) -> None:
    done, before, events = runs
    on_cluster, local = (done["reconcile"][n].result() for n in ("cluster", "local"))
    assert on_cluster == local, "the same summary"
    assert on_cluster["events_read"] == events
    assert set(on_cluster["by_status"]) >= {"completed", "failed", "timed_out", "pending"}
    warehouses = [done["reconcile"][n].settings.table_root for n in ("cluster", "local")]
    states = [{row["root_id"]: row for row in _rows(w, ROOT_STATE)} for w in warehouses]
    assert len(states[0]) == sum(on_cluster["by_status"].values()) > 250
    assert states[0] == states[1], "root_state, row by row and column by column"
    unmatched = [sorted(r["event_id"] for r in _rows(w, UNMATCHED_EVENTS)) for w in warehouses]
    assert unmatched[0] == unmatched[1] != [], "events whose init never came wait"
    _ran_on_the_workers(cluster, before, done["reconcile"]["cluster"])


def _counts(warehouse: str) -> Counter[str]:
    counted = DeltaTable(f"{warehouse}/apps/wordcount/counted").to_pyarrow_table(columns=["word"])
    return Counter(counted.column("word").to_pylist())


def test_the_word_count_on_the_cluster_counts_exactly_and_dead_letters_only_the_poison(
    runs: tuple[Runs, set[str], int], cluster: LocalCluster
) -> None:
    done, before, _ = runs
    run = done["wordcount"]["cluster"]
    report = run.result()
    assert report["sent"] == MESSAGES
    assert report["lost"] == 0
    assert report["words_exact"], report["word_mismatches"]
    assert report["replayed"] > 5, "the faults hit, and replays repaired them"
    assert report["queries_restarted"] == 1, "count was killed once, and restarted"
    assert report["dead_lettered"] == report["poison"] == 2, "the poison, only"
    assert report["out_of_attempts"] == 0

    warehouse = run.settings.table_root
    counts = _counts(warehouse)
    assert sum(counts.values()) == report["words_counted"] > 0
    dead = _rows(warehouse, DEAD_LETTERS)
    assert len(dead) == 2
    assert all("malformed message" in row["reason"] for row in dead), dead
    _ran_on_the_workers(cluster, before, run)
