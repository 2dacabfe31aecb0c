"""Every benchmark script, run as a user runs it, at a tiny size: a benchmark that crashes
fails the suite. Each checks its own output (the engines must agree, the word counts must
be exact, ...) and ends with a JSON summary, which is checked here for its figures. The
figures themselves are not tested: they are measured by hand and recorded in
docs/benchmarks.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import JARS_DIR, PROJECT_DIR, SPARK_INTERPRETED

BENCH = PROJECT_DIR / "bench"
ASSETS_DIR = PROJECT_DIR / "var" / "quality" / "assets"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.read_text().find("def main(") >= 0)


def run_script(name: str, args: list[str], work: Path) -> str:
    """Run bench/<name> with `args` as `make bench-*` runs it from a clone: in a directory
    whose `var/` holds what `make setup` fetched (the jars, Data Docs' assets), with no
    ackfold setting in the environment but the one the Makefile exports (its var dir, the
    checkout's `var/`); what it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACKFOLD_")}
    env["ACKFOLD_VAR_DIR"] = str(work / "var")  # the Makefile's `export ACKFOLD_VAR_DIR`
    # With Spark's code generation, as a user runs them (the other tiers interpret).
    env["SPARK_SUBMIT_OPTS"] = env.get("SPARK_SUBMIT_OPTS", "").replace(SPARK_INTERPRETED, "")
    env.update(SPARK_LOCAL_IP="127.0.0.1", GX_ANALYTICS_ENABLED="false")
    for cache, made_by_setup in ((JARS_DIR, "jars"), (ASSETS_DIR, "quality/assets")):
        link = work / "var" / made_by_setup
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(cache, target_is_directory=True)
    result = subprocess.run(
        [sys.executable, str(BENCH / name), *args], cwd=work, env=env,
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (
        f"bench/{name} exited {result.returncode}:\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout


def summary_of(out: str) -> dict[str, Any]:
    """The last JSON object the script printed (one line, or an indented block)."""
    lines = out.splitlines()
    decoder = json.JSONDecoder()
    for start in range(len(lines) - 1, -1, -1):
        if lines[start].startswith("{"):
            try:
                summary, _ = decoder.raw_decode("\n".join(lines[start:]))
            except ValueError:
                continue
            assert isinstance(summary, dict)
            return summary
    raise AssertionError(f"no JSON summary at the end of:\n{out[-3000:]}")


# The tiny size of each script, and what its summary must hold.
TINY: dict[str, list[str]] = {
    # The classic mode's repeats (nothing new; nothing new, Spark run: a second JVM) are
    # tests/spark/test_cli_on_spark_ledger.py's: the same three CLI runs.
    "connect.py": ["--events", "2000", "--workdir", "{work}", "--remote", "{connect}",
                   "--repeats", "connect"],
    # The demo on an s3a:// warehouse (the local S3 API, S3A's jars); with faults its
    # replay cycles take 20 minutes and more: measured by hand (docs/benchmarks.md).
    "demo_store.py": ["--stores", "s3", "--messages", "30", "--no-faults", "--workdir", "{work}"],
    "generate.py": ["--roots", "200", "--warehouse", "{work}/warehouse"],
    "kafka.py": ["--records", "300", "--rounds", "1", "--batch", "100", "--replays", "100"],
    "object_store.py": ["--appends", "3", "--roots", "5", "--writers", "2",
                        "--reconcile-roots", "300", "--workdir", "{work}"],
    # The later window on the embedded engine only: a second Spark quality run (a JVM and
    # Great Expectations on Spark, half the script's time) went down the same path as the
    # first; the engines' agreement is tests/spark/test_quality_conformance.py's.
    "quality.py": ["--events", "2000", "--increment", "1000", "--increment-engines",
                   "embedded", "--workdir", "{work}"],
    "reconcile.py": ["--sizes", "2000", "--runs", "1", "--spark-sizes", "2000",
                     "--spark-masters", "local[2]", "--increment", "1000",
                     "--histories", "0,2000", "--workdir", "{work}",
                     "--plot", "{work}/plot.png"],
    "replay.py": ["--messages", "100"],
    # The suite's soak: three days, no JVM but the run's ElasticMQ; each fault once.
    "soak.py": ["--days", "3", "--roots", "3", "--reconcile-every", "3", "--check-every", "1",
                "--quality-every", "1000000", "--log-retention", "1", "--no-spark",
                "--sqs", "{sqs}", "--workdir", "{work}"],
    "spark_steps.py": ["--events", "2000", "--workdir", "{work}", "--threads"],
    "tracking_steps.py": ["--sentences", "200", "--words", "5", "--runs", "1"],
    "ui.py": ["--roots", "2000", "--days", "2", "--runs", "1", "--workdir", "{work}"],
    # Two micro-batches a stage: the sizes seen show that `--batch` sizes them; after one
    # warm-up batch, left out of them.
    "wordcount.py": ["--messages", "20", "--rounds", "1", "--batch", "10", "--warmup", "10"],
}  # fmt: skip


def test_every_script_has_a_tiny_run() -> None:
    assert sorted(TINY) == SCRIPTS, "a new bench/ script needs its tiny run here"


@pytest.mark.timeout(1500)  # the quality script alone took 6 to 10 minutes beside other tiers
@pytest.mark.parametrize("name", sorted(TINY))
def test_the_script_runs_at_a_tiny_size(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # connect.py: the run's shared Spark Connect server (tests/connect), not one more;
    # soak.py: the run's shared ElasticMQ (tests/sqs).
    connect = request.getfixturevalue("connect_url") if name == "connect.py" else ""
    sqs = request.getfixturevalue("sqs_server").endpoint_url if name == "soak.py" else ""
    args = [arg.format(work=tmp_path, connect=connect, sqs=sqs) for arg in TINY[name]]
    CHECKS[name](run_script(name, args, tmp_path), tmp_path)


@pytest.mark.timeout(1500)
def test_the_tracking_overhead_benchmark_runs_through_connect(
    tmp_path: Path, connect_url: str
) -> None:
    """`bench/wordcount.py --remote`: every app's batches in the server's Python worker.
    Compact acks only (`--modes`): per-tuple acks take the same path, shown in classic."""
    args = [*TINY["wordcount.py"], "--modes", "compact", "--remote", connect_url]
    _wordcount(run_script("wordcount.py", args, tmp_path), tmp_path, modes=("compact",))


def _connect(out: str, work: Path) -> None:
    summary = summary_of(out)  # the script checks both modes classify the roots alike
    assert sum(summary["by_status"].values()) == summary["roots"] > 0
    assert set(summary["classic"]) == {"all new"}
    assert set(summary["connect"]) == {"all new", "nothing new", "nothing new, Spark run"}
    for mode in ("classic", "connect"):
        assert all(seconds > 0 for seconds in summary[mode].values())


def _generate(out: str, work: Path) -> None:
    match = re.search(r"wrote 200 roots and ([\d,]+) events", out)
    assert match, out
    assert int(match.group(1).replace(",", "")) > 200
    assert (work / "warehouse" / "ack_events" / "_delta_log").is_dir()


def _kafka(out: str, work: Path) -> None:
    # The script checks every record registered, every tracked root complete, re-reads.
    summary = summary_of(out)
    assert (summary["records"], summary["replays"]) == (300, 100)
    assert all(summary[key] > 0 for key in ("produce_per_s", "replay_per_s")), summary
    assert summary["ranges_driver_ms"] > 0, summary
    for name in ("ingest", "pipeline", "pipeline_two_pass", "foreach_batch", "ranges_probe"):
        figures = summary[name]
        for label in ("tracked", "untracked"):
            for key in ("per_s", "start_s", "cpu_s"):
                assert figures[f"{label}_{key}"] > 0, (name, figures)


def _demo_store(out: str, work: Path) -> None:
    summary = summary_of(out)  # the script exits 1 if a message was lost
    report = summary["s3"]["report"]
    assert (report["sent"], report["lost"], report["words_exact"]) == (30, 0, True), report
    assert report["completed_first_try"] == 30
    assert list((work / "s3").glob("journal.jsonl")), "the demo did not run on the S3 API"


def _object_store(out: str, work: Path) -> None:
    summary = summary_of(out)  # the script checks that every appended root is there
    for store in ("local", "s3", "gcs", "azure"):
        assert summary[f"{store}_2"]["rows_per_s"] > 0, summary
        reconciled = summary[f"{store}_reconcile"]
        assert reconciled["events"] > 0, summary
        assert 0 < reconciled["new_events"] < reconciled["events"], summary  # only the new
    for store in ("s3", "gcs", "azure"):
        assert summary[f"{store}_2"]["requests_per_append"] > 0
    assert (work / "s3" / "journal.jsonl").stat().st_size > 0


def _quality(out: str, work: Path) -> None:
    # The script stops if the engines disagree on any check.
    summary = summary_of(out)
    # Each window's embedded run says each suite's checks, then both engines' times.
    first_window = out.split("quality over", 1)[0]
    suites = re.findall(r"quality: ([\w.]+): (\d+) checks", first_window)
    assert {name.split(".")[0] for name, _ in suites} == {"ledger", "delivery"}, out
    assert sum(int(n) for _, n in suites) == summary["window_all"]["checks"]["count"] > 0
    for window, engines in (("window_all", ("embedded", "spark")),
                            ("window_increment", ("embedded",))):  # fmt: skip
        for engine in engines:
            assert summary[window][engine]["seconds"] > 0
    assert "spark" not in summary["window_increment"]
    assert (
        summary["window_increment"]["checks"]["count"] == summary["window_all"]["checks"]["count"]
    )


def _reconcile(out: str, work: Path) -> None:
    # The script stops if the engines disagree on the roots by status.
    summary = summary_of(out)
    row = summary["sizes"]["2000"]
    assert sum(row["by_status"].values()) == row["roots"]
    assert {"ackfold", "duckdb", "spark"} <= set(row)
    # The Spark run on the master asked for, its time per core beside the embedded engine's.
    assert row["spark_by_master"]["local[2]"]["cores"] == 2
    assert row["spark"]["embedded_per_core_ratio"] > 0
    assert row["ratio_to_duckdb"] > 0
    assert set(summary["increment"]) == {"0", "2000"}
    assert (work / "plot.png").stat().st_size > 0


def _replay(out: str, work: Path) -> None:
    summary = summary_of(out)  # the script checks every message sent and in the queue
    assert summary["messages"] == 100
    assert summary["replay_msgs_per_s"] > 0
    assert summary["boto3_send_batch_msgs_per_s"] > 0
    # The replay ran on the embedded engine, next to the queue alone, in the same run.
    assert summary["embedded_replay_seconds"] >= summary["embedded_plan_seconds"] > 0


def _soak(out: str, work: Path) -> None:
    summary = summary_of(out)  # the script exits 1 if any check failed
    assert summary["failed"] == []
    (run,) = summary["runs"]
    counts = run["counts"]
    assert counts["checks passed"] == 4, counts  # each simulated day, and the end
    for fault in ("paused hosts fenced out", "reconciles killed at a commit",
                  "replays killed at a commit", "reconciles stopped by an unreadable claim",
                  "paused maintenance fenced out"):  # fmt: skip
        assert counts.get(fault, 0) >= 1, (fault, counts)
    # A paused replay is met after its claim or before it: either, once at least.
    assert any(k.startswith("paused replays fenced out") for k in counts), counts
    # It began on the contract-v1 golden ledger, whose v1 producer wrote beside the
    # tracked ones all through, and `ackfold upgrade` added id_scheme on day 1.
    assert counts["golden events"] == 16, counts
    assert (counts["upgrades"], counts["columns added by the upgrade"]) == (1, 1), counts
    assert sum(run["fates"]["legacy"].values()) > 0, run["fates"]
    # Each fault hit the commit it means: a claim read, a reconcile's and a replay's.
    faults = run["faults"]
    assert any(k.startswith("unreadable claim") for k in faults), faults
    assert any(k.startswith("freeze") for k in faults), faults
    assert counts["reconciles (embedded)"] > 10
    assert counts["maintenance runs"] == 3
    assert counts["reconciles missed in an outage"] >= 1
    assert run["cost_flat"]
    assert run["storage_bounded"]
    # Every table's newest checkpoint was read, and none kept a tombstone past its retention.
    tombstones = run["tombstones_past_retention"]
    assert {"ack_events", "roots", "root_state"} <= set(tombstones), tombstones
    assert not any(tombstones.values()), tombstones
    # VACUUM left no file that no version names (ack_events apart: the soak's own clock).
    dead = run["dead_files_after_maintenance"]
    assert {"roots", "root_state", "replay_log"} <= set(dead), dead
    assert not any(dead.values()), dead
    # A day of log kept, by the soak's clock: the logs lost their oldest commits, and every
    # check after that still read each table.
    assert counts["log files expired"] > 0, counts
    # ack_events' VACUUM by versions: the files OPTIMIZE replaced went once folded.
    assert counts["ack_events files vacuumed"] > 0, counts
    # Three days: one month, holding every step's seconds.
    (month,) = run["seconds_by_month"].values()
    assert month == run["seconds_by_step"], run["seconds_by_month"]
    assert run["reconciles_reading_more_than_new"] == 0


def _spark_steps(out: str, work: Path) -> None:
    summary = summary_of(out)  # the script checks the reconcile found the ledger's statuses
    assert summary["events"] > 0
    steps = summary["steps"]
    # The jobs come from Spark's event log, each in the group of the step that ran it.
    assert summary["jobs"] == sum(step["jobs"] for step in steps.values()) > 0, steps
    assert steps["fold (cache, oldest fold)"]["jobs"] >= 1, steps
    assert steps["fold (cache, oldest fold)"]["wall"] > 0, steps
    # The JVM's CPU by thread: its task threads and its JIT compilers among them.
    threads = summary["jvm_threads"]
    assert any(kind.startswith("Executor task") for kind in threads), threads
    assert any("CompilerThre" in kind for kind in threads), threads
    assert sum(threads.values()) > 0, threads


def _tracking_steps(out: str, work: Path) -> None:
    summary = summary_of(out)  # the script checks that the events complete every root
    assert (summary["sentences"], summary["words"]) == (200, 5)
    assert len(summary["steps"]) == 6
    assert all(step["wall_s"] > 0 for step in summary["steps"].values()), summary
    # What each step ran, from Spark: every step is at least one job, with its stages.
    assert all(step["jobs"] >= 1 for step in summary["steps"].values()), summary
    assert all(step["stages"] >= step["jobs"] for step in summary["steps"].values()), summary


def _ui(out: str, work: Path) -> None:
    summary = summary_of(out)  # the script checks every page answers 200, every command 0
    assert summary["roots"] == 2000
    timed = summary["median_ms"]
    assert any(k.startswith("roots:") for k in timed)
    assert any(k.startswith("cli:") for k in timed)
    assert set(summary["median_cpu_ms"]) == set(timed)
    assert all(ms > 0 for ms in summary["median_cpu_ms"].values())


def _wordcount(out: str, work: Path, modes: tuple[str, ...] = ("compact", "per_tuple")) -> None:
    summary = summary_of(out)  # the script checks every app's word counts and batch sizes
    assert set(summary["micro_batches"]) == {*modes, "untracked"}
    assert (summary["messages"], summary["warmup"]) == (20, 10)
    assert summary["untracked_msgs_per_s"] > 0
    assert summary["untracked_warm_msgs_per_s"] > 0
    # The benchmark measures what it names: each stage's micro-batches, as Spark saw them,
    # are the ingest batches asked for (--batch 10: two of 10 messages), on every app.
    for app, stages in summary["micro_batches"].items():
        assert stages["split"] == [10, 10], (app, stages)
        assert len(stages["count"]) == 2, (app, stages)  # each split micro-batch's words
    assert len({sum(stages["count"]) for stages in summary["micro_batches"].values()}) == 1
    for mode in modes:
        assert summary[f"{mode}_msgs_per_s"] > 0
        assert summary[f"{mode}_cpu_s"] > 0
        # The warm run: the measured messages alone, after the warm-up batch.
        assert 0 < summary[f"{mode}_warm_s"] < summary[f"{mode}_wall_s"]
        assert 0 < summary[f"{mode}_warm_cpu_s"] < summary[f"{mode}_cpu_s"]
        steps = summary["steps"][mode]
        assert steps["split"]["rows"] == 10, steps
        assert steps["split"]["addBatch"] > 0, steps
        # The jobs each batch function ran: read from the driver's JVM, in a classic session.
        assert (steps["count"].get("jobs", 0) >= 1) is not summary["connect"], steps
    # Compact acks: an init, a split and a count row per sentence; per tuple, one a word.
    assert summary["compact_rows_per_msg"] <= 3
    if "per_tuple" in modes:
        assert summary["per_tuple_rows_per_msg"] > 3
        assert summary["compact_bytes_per_msg"] < summary["per_tuple_bytes_per_msg"]
    else:
        assert "per_tuple_rows_per_msg" not in summary


CHECKS: dict[str, Callable[[str, Path], None]] = {
    "connect.py": _connect,
    "demo_store.py": _demo_store,
    "generate.py": _generate,
    "kafka.py": _kafka,
    "object_store.py": _object_store,
    "quality.py": _quality,
    "reconcile.py": _reconcile,
    "replay.py": _replay,
    "soak.py": _soak,
    "spark_steps.py": _spark_steps,
    "tracking_steps.py": _tracking_steps,
    "ui.py": _ui,
    "wordcount.py": _wordcount,
}
