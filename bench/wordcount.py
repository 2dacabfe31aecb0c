"""Tracking overhead: the word count with ackfold tracking against the same app without.

    .venv/bin/python bench/wordcount.py [--messages 5000] [--rounds 3] [--batch 1000]
        [--modes compact,per_tuple] [--warmup N] [--remote sc://HOST:PORT] [--json PATH]
        [--py-spy DIR]

Starts ElasticMQ on a free loopback port. Each round sends `--messages` sentences to each
app's queue and runs each app to the end of its queue, as its own command (a fresh
process and JVM each time, started by this one), the apps' order rotated from one round
to the next: the tracked app (`ackfold.demo.wordcount.WordCount`, no faults) with
compact acks (the default), the same with per-tuple acks (one ack event per word)
(`--modes` names the tracked ones to run), and the untracked app below: the same receive,
land-then-delete loop, the same split and the same keyed MERGE into the sink, but no
`roots` rows, no `_ackfold` column and no acks.

Micro-batches of the size named: each ingest batch (`--batch` messages, SQS's
`max_messages_per_batch`) is one Delta file, and each stage query reads one file a
micro-batch (`maxFilesPerTrigger` 1, on every app alike), so a split micro-batch is
`--batch` messages and a count micro-batch the words of one split micro-batch. The sizes
Spark saw (`numInputRows` of each micro-batch) are printed, and checked.

`--warmup N` adds what a long-running app pays: each app's command first runs to the
end of N warm-up messages (its JVM compiles, its queries start, its tables are read once),
then sends itself the `--messages` and runs to their end; that run's time and CPU are the
*warm* figures, and only its micro-batches are checked and in the medians.

For each app: the wall time of the whole command (JVM start included) and its
CPU-seconds (user + system of the command's process tree from /proc: the driver's
Python, its JVM, PySpark's Python workers; through `--remote`, the client only), medians
of the rounds, and the overhead of each tracked mode by both. Then the median
micro-batch of each stage: Spark's `durationMs` steps and, in a classic session, the
jobs, stages, tasks, rows, shuffle bytes, executor CPU and code generation of its batch
function (`microbatches.py`). `--py-spy DIR` records each command's Python driver with
py-spy, when it is installed, into a flame graph in DIR. The JSON summary goes last, and
to `--json PATH`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import checkout  # noqa: F401  (before settings load: the checkout's var/)
from common import per_second
from microbatches import DURATIONS, JOB_FIELDS, MicroBatches, median_batch, tree_cpu_seconds
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackfold.config import Settings, load_settings
from ackfold.config.demo import FaultSettings
from ackfold.demo.feed import NOT_WORD_PATTERN, Feed
from ackfold.demo.wordcount import COUNT, SPLIT, WordCount, with_demo_policy
from ackfold.sources.base import Received
from ackfold.sources.sqs import SqsQueue
from ackfold.sources.sqs_client import sqs_client
from ackfold.spark import get_spark, is_connect
from ackfold_dev.elasticmq import ElasticMQ

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


LANDING = "message_id STRING, body STRING, ingested_at TIMESTAMP"
WORDS = "message_id STRING, position INT, word STRING"


class Untracked:
    """The word count as a user would write it without ackfold, on the same plumbing."""

    def __init__(
        self, spark: SparkSession, settings: Settings, queue: str, seen: MicroBatches
    ) -> None:
        self.spark = spark
        self.seen = seen
        self.queue = SqsQueue(settings, queue)
        self.max_messages = settings.sqs.max_messages_per_batch
        self.wait = int(settings.sqs.wait_time.total_seconds())
        home = f"{settings.table_root}/untracked"
        self.landing, self.words, self.counted = (f"{home}/{t}" for t in ("in", "words", "sink"))
        self.checkpoints = f"{home}/_checkpoints"
        for path, ddl in ((self.landing, LANDING), (self.words, WORDS), (self.counted, WORDS)):
            spark.createDataFrame([], ddl).write.format("delta").mode("ignore").save(path)

    def step(self) -> None:
        while messages := self._receive():
            now = datetime.now(UTC)
            rows = [(m.message_id, m.body, now) for m in messages]
            # One file a batch, as the ingester's delta-rs commit of its roots.
            landed = self.spark.createDataFrame(rows, LANDING).coalesce(1)
            landed.write.format("delta").mode("append").save(self.landing)
            self.queue.acknowledge(messages)
        # Functions of paths only: through Spark Connect they run in the server's worker.
        for name, source, batch in (
            ("split", self.landing, partial(split_into, self.words)),
            ("count", self.words, partial(count_into, self.counted)),
        ):
            query = (
                self.spark.readStream.format("delta").option("maxFilesPerTrigger", 1)
                .load(source).writeStream.foreachBatch(self.seen.wrap(name, batch))
                .option("checkpointLocation", f"{self.checkpoints}/{name}")
                .trigger(availableNow=True).start()
            )  # fmt: skip
            self.seen.watch(name, query).awaitTermination()

    def _receive(self) -> list[Received]:
        """Up to max_messages_per_batch, 10 a call, as the ingester fills a batch."""
        batch: list[Received] = []
        while len(batch) < self.max_messages:
            # A long poll first, as the ingester does: both end on one empty long poll.
            more = self.queue.receive(self.max_messages - len(batch), 0 if batch else self.wait)
            if not more:
                break
            batch.extend(more)
        return batch


def split_into(words: str, frame: DataFrame, batch_id: int) -> None:
    """The split stage's batch: each sentence's words, appended once per batch id."""
    text = F.get_json_object("body", "$.text")
    split = F.filter(F.split(F.lower(text), NOT_WORD_PATTERN), lambda w: w != "")
    exploded = frame.select("message_id", F.posexplode(split).alias("position", "word"))
    exploded.write.format("delta").mode("append").option("txnAppId", "untracked-split").option(
        "txnVersion", batch_id
    ).save(words)


def count_into(counted: str, frame: DataFrame, batch_id: int) -> None:
    """The count stage's batch: a keyed MERGE into the sink, as each API's users write it."""
    spark = frame.sparkSession
    on = "t.message_id = s.message_id AND t.position = s.position"
    if is_connect(spark):  # Delta's Python API reaches no Connect server; its SQL does
        frame.createOrReplaceTempView("untracked_words")
        spark.sql(f"MERGE INTO delta.`{counted}` t USING untracked_words s ON {on} "
                  "WHEN NOT MATCHED THEN INSERT *")  # fmt: skip
        return
    from delta.tables import DeltaTable

    (
        DeltaTable.forPath(spark, counted).alias("t").merge(frame.alias("s"), on)
        .whenNotMatchedInsertAll().execute()
    )  # fmt: skip


class Tracked(WordCount):
    """The demo's app as its users run it, each stage query reading one file (one ingest
    batch, one split micro-batch's words) a micro-batch, its micro-batches recorded."""

    def __init__(
        self, spark: SparkSession, settings: Settings, *, acks: str, seen: MicroBatches
    ) -> None:
        self.seen = seen
        super().__init__(spark, settings, acks=acks)

    def __getstate__(self) -> dict[str, object]:
        state = super().__getstate__()
        state.pop("seen", None)  # holds the session: never sent to a Connect server
        return state

    def _queries(self) -> list[tuple[str, Callable[[], DataFrame], object]]:
        assert self.ingester is not None
        return [
            (SPLIT, partial(self.ingester.stream, max_files_per_trigger=1),
             self.seen.wrap(SPLIT, self._split_batch)),
            (COUNT, self._words_stream, self.seen.wrap(COUNT, self._count_batch)),
        ]  # fmt: skip

    def _words_stream(self) -> DataFrame:
        words = self.spark.readStream.format("delta").option("maxFilesPerTrigger", 1)
        return words.load(self.words_path)

    def _start(
        self, stage: str, source: Callable[[], DataFrame], batch: object, trigger: dict[str, object]
    ) -> StreamingQuery:
        return self.seen.watch(stage, super()._start(stage, source, batch, trigger))


MODES = ("compact", "per_tuple")
CHILD = "app run: "  # how an app's command prints its figures, one JSON line
CPU_MEASURE = (
    "CPU-seconds: user + system of the app's command and every process under it, from "
    "/proc (its Python, its JVM, PySpark's Python workers), read when its run ends"
)


def bench_settings(work: Path, port: int, batch: int, remote: str | None) -> Settings:
    """Every app's settings but its warehouse: the local SQS, `--batch` a batch."""
    return with_demo_policy(
        load_settings(
            var_dir=work, jars_dir=load_settings().jars_dir, spark={"remote": remote},
            sqs={"endpoint_url": f"http://127.0.0.1:{port}", "wait_time": "1s",
                 "max_messages_per_batch": batch},
        )
    )  # fmt: skip


def run_app(args: argparse.Namespace) -> None:
    """One app's command: start Spark, run the app to the end of its queue, print its
    figures (`CHILD`, JSON), and exit."""
    work = Path(args.work)
    settings = bench_settings(work, args.port, args.batch, args.remote)
    spark = get_spark(settings, app_name=f"ackfold-bench-wordcount-{args.app}")
    seen = MicroBatches(spark)
    app: Tracked | Untracked
    if args.app == "untracked":
        app = Untracked(spark, settings, args.queue, seen)
    else:
        policy = settings.apps["wordcount"].model_copy(update={"source_queue": args.queue})
        own = settings.model_copy(
            update={"warehouse": str(work / args.app), "apps": {"wordcount": policy}}
        )
        app = Tracked(spark, own, acks=args.app, seen=seen)
    warm_from = 0
    if args.warmup:
        app.step()  # the warm-up messages, sent before this command started
        warm_from = len(seen.batches())
        client = sqs_client(settings)
        feed = Feed.build(args.messages, FaultSettings())
        feed.send(client, client.get_queue_url(QueueName=args.queue)["QueueUrl"])
    warm_cpu = tree_cpu_seconds()
    start = time.perf_counter()
    app.step()
    step_s = time.perf_counter() - start
    cpu = tree_cpu_seconds()
    figures = {"step_s": step_s, "cpu_s": cpu, "step_cpu_s": cpu - warm_cpu,
               "batches": seen.batches()[warm_from:]}  # fmt: skip
    print(CHILD + json.dumps(figures), flush=True)
    spark.stop()
    os._exit(0)  # not delta-rs's abort at interpreter exit


def command(args: argparse.Namespace, name: str, work: Path, port: int, queue: str) -> list[str]:
    """The command line of one app's run."""
    line = [sys.executable, str(Path(__file__).resolve()), "--app", name, "--work", str(work),
            "--port", str(port), "--queue", queue, "--batch", str(args.batch),
            "--messages", str(args.messages), "--warmup", str(args.warmup)]  # fmt: skip
    return [*line, "--remote", args.remote] if args.remote else line


def py_spy() -> str | None:
    """py-spy's path, when it is installed (never a dependency): `$PY_SPY`, or on PATH."""
    return os.environ.get("PY_SPY") or shutil.which("py-spy")


def timed(line: list[str]) -> dict[str, object]:
    """Run an app's command: its figures, and the wall time of the whole command."""
    start = time.perf_counter()
    done = subprocess.run(line, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    figures = [x for x in done.stdout.splitlines() if x.startswith(CHILD)]
    if done.returncode != 0 or not figures:
        raise SystemExit(
            f"{' '.join(line)} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    run: dict[str, object] = json.loads(figures[-1].removeprefix(CHILD))
    run["wall_s"] = wall
    return run


def sizes(batches: list[dict[str, object]], stage: str) -> list[int]:
    """The rows of each of `stage`'s micro-batches, in order."""
    return [int(b["rows"]) for b in batches if b["stage"] == stage]  # type: ignore[call-overload]


def check_sizes(name: str, batches: list[dict[str, object]], args: argparse.Namespace,
                words: int) -> None:  # fmt: skip
    """Stop unless the micro-batches were the size asked for: each split micro-batch one
    ingest batch of `--batch` messages, and one count micro-batch for each, all the words."""
    full, rest = divmod(args.messages, args.batch)
    asked = [args.batch] * full + ([rest] if rest else [])
    split, count = sizes(batches, SPLIT), sizes(batches, COUNT)
    if split != asked or len(count) != len(asked) or sum(count) != words:
        raise SystemExit(
            f"{name}: micro-batches not of the size asked for: split {split} (asked {asked}), "
            f"count {count} ({len(asked)} micro-batches of {words:,} words in all asked)"
        )


def table_rows(path: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(path).to_pyarrow_dataset().count_rows())


def ledger_size(warehouse: Path) -> tuple[int, int]:
    """Rows and bytes (its parquet files) of `ack_events` under `warehouse`."""
    files = (warehouse / "ack_events").glob("*.parquet")
    return table_rows(str(warehouse / "ack_events")), sum(p.stat().st_size for p in files)


def warm_figures(found: list[dict[str, object]]) -> dict[str, float]:
    """The medians of an app's warm runs (`--warmup`): the measured run's seconds and
    CPU-seconds, after the warm-up."""
    return {
        key: statistics.median(float(run[key]) for run in found)  # type: ignore[arg-type]
        for key in ("step_s", "step_cpu_s")
    }


def warm_overheads(mode: str, warm: dict[str, dict[str, float]], messages: int) -> dict[str, float]:
    """Print and return what tracking costs a warm app, by time and by CPU."""
    ours, base = warm[mode], warm["untracked"]
    overhead = (ours["step_s"] - base["step_s"]) / base["step_s"]
    cpu_overhead = (ours["step_cpu_s"] - base["step_cpu_s"]) / base["step_cpu_s"]
    print(
        f"tracking overhead in a warm app, {mode} acks: {overhead:+.0%} by the time of the "
        f"measured run ({ours['step_s']:.1f} vs {base['step_s']:.1f} s; "
        f"{per_second(messages / ours['step_s']):,g} vs "
        f"{per_second(messages / base['step_s']):,g} msgs/s), {cpu_overhead:+.0%} by its "
        f"CPU-seconds ({ours['step_cpu_s']:.1f} vs {base['step_cpu_s']:.1f})"
    )
    return {
        f"{mode}_warm_s": round(ours["step_s"], 2), f"{mode}_warm_overhead": round(overhead, 3),
        f"{mode}_warm_cpu_s": round(ours["step_cpu_s"], 2),
        f"{mode}_warm_cpu_overhead": round(cpu_overhead, 3),
    }  # fmt: skip


def print_steps(steps: dict[str, dict[str, dict[str, float]]]) -> None:
    """A table per app: the median micro-batch of each stage, step by step."""
    print("\nThe median micro-batch of each stage (each figure's median over the stage's "
          "micro-batches of every round). ms: Spark's durationMs; addBatch is the "
          "foreachBatch function. Then, in a classic session, what that function ran: "
          "Spark jobs, their stages and tasks, rows read, shuffle bytes, the executors' "
          "CPU ms, classes compiled by code generation and the ms it took.")  # fmt: skip
    for name, stages in steps.items():
        print(f"\n{name:<22}" + "".join(f"{stage:>12}" for stage in stages))
        for field in ("rows", *DURATIONS, *JOB_FIELDS):
            if any(field in figures for figures in stages.values()):
                label = f"{field} ms" if field in DURATIONS else field
                cells = "".join(f"{stages[s].get(field, 0):>12,.0f}" for s in stages)
                print(f"{label:<22}{cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--batch", type=int, default=1000,
        help="messages an ingest batch (sqs.max_messages_per_batch) and a split micro-batch",
    )  # fmt: skip
    parser.add_argument(
        "--modes", default=",".join(MODES), type=lambda text: tuple(text.split(",")),
        help=f"the tracked apps' ack modes to run beside the untracked one (default: "
        f"{','.join(MODES)})",
    )  # fmt: skip
    parser.add_argument(
        "--remote", default=None, help="run every app through this sc:// Spark Connect server"
    )
    parser.add_argument(
        "--warmup", type=int, default=0, metavar="N",
        help="each app first runs N uncounted messages, then the measured ones: the warm "
        "figures of a long-running app (default 0: none)",
    )  # fmt: skip
    parser.add_argument("--json", default=None, help="also write the JSON summary here")
    parser.add_argument(
        "--py-spy", default=None, metavar="DIR",
        help="record each app's Python driver with py-spy (if installed): flame graphs in DIR",
    )  # fmt: skip
    # One app's run, as the benchmark starts it.
    for hidden in ("--app", "--work", "--queue"):
        parser.add_argument(hidden, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.app:
        run_app(args)
        return
    if args.messages < 1 or args.batch < 1 or args.rounds < 1 or args.warmup < 0:
        parser.error("--messages, --batch and --rounds must be at least 1, --warmup at least 0")
    unknown = sorted(set(args.modes) - set(MODES))
    if unknown or not args.modes:
        parser.error(
            f"--modes: {', '.join(unknown) or 'none given'}; choose from {', '.join(MODES)}"
        )
    modes = tuple(mode for mode in MODES if mode in args.modes)
    apps = (*modes, "untracked")
    spy = py_spy() if args.py_spy else None
    if args.py_spy and spy is None:
        print("--py-spy: no py-spy on PATH nor in $PY_SPY: no flame graphs")
    work = Path(tempfile.mkdtemp(prefix="ackfold-bench-wordcount-"))
    port = free_port()
    settings = bench_settings(work, port, args.batch, args.remote)
    feed = Feed.build(args.messages, FaultSettings())
    words = sum(feed.true_counts().values())
    warmup = Feed.build(args.warmup, FaultSettings()) if args.warmup else None
    warm_words = sum(warmup.true_counts().values()) if warmup else 0
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in apps}
    with ElasticMQ(settings, port=port) as server:
        client = server.client()
        queues = {name: f"bench-{name.replace('_', '-')}-{uuid.uuid4().hex[:6]}" for name in apps}
        urls = {k: client.create_queue(QueueName=q)["QueueUrl"] for k, q in queues.items()}
        for mode in modes:
            client.create_queue(QueueName=f"{queues[mode]}-dlq")
        for round_ in range(args.rounds):
            turn = round_ % len(apps)  # each app first in turn
            for name in (*apps[turn:], *apps[:turn]):
                # The warm-up messages, or the measured ones (the app sends those itself
                # once warm).
                (warmup or feed).send(client, urls[name])
                line = command(args, name, work, port, queues[name])
                if spy is not None:
                    Path(args.py_spy).mkdir(parents=True, exist_ok=True)
                    graph = Path(args.py_spy, f"{name}-round{round_ + 1}.svg").resolve()
                    line = [spy, "record", "--output", str(graph), "--", *line]
                run = timed(line)
                batches: list[dict[str, object]] = run["batches"]  # type: ignore[assignment]
                check_sizes(name, batches, args, words)
                runs[name].append(run)
                count = sizes(batches, COUNT)
                after = f" after {args.warmup:,} warm-up ones" if args.warmup else ""
                print(f"round {round_ + 1} {name:<10} {args.messages:,} messages{after}: "
                      f"{run['wall_s']:5.1f} s the whole command, {run['cpu_s']:5.1f} CPU-s "
                      f"(the measured run {run['step_s']:.1f} s, "
                      f"{run['step_cpu_s']:.1f} CPU-s); "
                      f"micro-batches: split {sizes(batches, SPLIT)} rows, count {count} rows"
                      + (f"; py-spy: {graph}" if spy is not None else ""), flush=True)  # fmt: skip
    wall = {n: statistics.median(float(r["wall_s"]) for r in found) for n, found in runs.items()}  # type: ignore[arg-type]
    cpu = {n: statistics.median(float(r["cpu_s"]) for r in found) for n, found in runs.items()}  # type: ignore[arg-type]
    expected = args.rounds * (words + warm_words)
    taken = args.messages + args.warmup  # by each whole command
    for name in apps:
        home = f"{work / name}/apps/wordcount" if name in MODES else settings.table_root
        found = table_rows(f"{home}/counted" if name in MODES else f"{home}/untracked/sink")
        if found != expected:
            raise SystemExit(f"{name}: {found:,} words in its sink, {expected:,} sent")
    print(f"\nmedians of {args.rounds} round(s), each app its own command; {CPU_MEASURE}"
          f"{'; through Spark Connect the server is not counted' if args.remote else ''}. "
          f"Load average {os.getloadavg()[0]:.1f} at the end: over 1 or so, the figures "
          f"are a shared machine's.")  # fmt: skip
    figures: dict[str, object] = {
        "messages": args.messages, "rounds": args.rounds, "batch": args.batch,
        "connect": bool(args.remote),
        "untracked_msgs_per_s": per_second(taken / wall["untracked"]),
        "untracked_wall_s": round(wall["untracked"], 2),
        "untracked_cpu_s": round(cpu["untracked"], 2),
        "load_average": round(os.getloadavg()[0], 1), "cpu_measure": CPU_MEASURE,
        "micro_batches": {n: {s: sizes(found[0]["batches"], s) for s in (SPLIT, COUNT)}  # type: ignore[arg-type]
                          for n, found in runs.items()},
    }  # fmt: skip
    sent = args.rounds * (args.messages + args.warmup)
    warm = {name: warm_figures(found) for name, found in runs.items()} if args.warmup else {}
    if warm:
        figures["warmup"] = args.warmup
        figures["untracked_warm_msgs_per_s"] = per_second(
            args.messages / warm["untracked"]["step_s"]
        )
    for mode in modes:
        overhead = (wall[mode] - wall["untracked"]) / wall["untracked"]
        cpu_overhead = (cpu[mode] - cpu["untracked"]) / cpu["untracked"]
        rows, size = ledger_size(work / mode)
        print(
            f"tracking overhead, {mode} acks: {overhead:+.0%} by wall time of the whole "
            f"command ({wall[mode]:.1f} vs {wall['untracked']:.1f} s; "
            f"{per_second(taken / wall[mode]):,g} vs "
            f"{per_second(taken / wall['untracked']):,g} msgs/s), "
            f"{cpu_overhead:+.0%} by CPU-seconds ({cpu[mode]:.1f} vs "
            f"{cpu['untracked']:.1f}); ack_events {rows / sent:.1f} rows and "
            f"{size / sent:,.0f} bytes per message"
        )
        figures.update({
            f"{mode}_msgs_per_s": per_second(taken / wall[mode]),
            f"{mode}_wall_s": round(wall[mode], 2), f"{mode}_overhead": round(overhead, 3),
            f"{mode}_cpu_s": round(cpu[mode], 2), f"{mode}_cpu_overhead": round(cpu_overhead, 3),
            f"{mode}_rows_per_msg": round(rows / sent, 2),
            f"{mode}_bytes_per_msg": round(size / sent),
        })  # fmt: skip
        if warm:
            figures.update(warm_overheads(mode, warm, args.messages))
    steps = {
        name: {
            stage: median_batch([b for r in found for b in r["batches"]], stage)  # type: ignore[attr-defined]
            for stage in (SPLIT, COUNT)
        }
        for name, found in runs.items()
    }
    print_steps(steps)
    figures["steps"] = steps
    summary = json.dumps(figures, sort_keys=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, sort_keys=True, indent=2) + "\n")
    print(summary)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
