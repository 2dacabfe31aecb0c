"""Where a tracked micro-batch's time goes: each step of the word count, alone.

    .venv/bin/python bench/tracking_steps.py [--sentences 10000] [--words 40] [--runs 4]

One Spark session, no queue: `--sentences` rows of `--words` words each, registered as
roots by a spout. Each step runs once to warm up, then `--runs` times, and prints the
fastest run in wall-clock seconds and in CPU-seconds of the Spark JVM. The CPU figure
holds on a machine other work also loads. Beside them, what the last run ran, from Spark
(`microbatches.SparkCounters`): its Spark jobs, their stages, the bytes they shuffled,
and the classes code generation compiled and the ms it took: a step that compiles again
on a run after the warm-up missed Spark's code-generation cache. The steps:

- the split as a user writes it without ackfold (`posexplode`, written to Delta), and
  the same split tracked (`StageTracker.explode`, the words and their `_ackfold`);
- `split.ack(sentences, words)`: the split's acks, computed from its inputs and outputs;
  and `split.ack(sentences, exploded=...)`, the same from the sentences' arrays alone;
- `count.ack(words)`, compact and per tuple: the count's acks of the words, read back
  from the Delta table as the count stage reads them.

The script uses only the public tracking API, so the same command measures another
version of ackfold: put that checkout's `include` first on `PYTHONPATH`. At the end it
checks that the events complete every root. Then it prints a JSON summary.
"""

from __future__ import annotations

import argparse
import inspect
import json
import shutil
import tempfile
import time
from collections.abc import Callable

import checkout  # noqa: F401  (before settings load: the checkout's var/)
from common import CpuClock
from microbatches import SparkCounters
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ackfold.spark import get_spark
from ackfold.track.stage import StageTracker


def noop(frame: DataFrame) -> Callable[[], None]:
    """Compute every row of `frame`, write nothing."""
    return lambda: frame.write.format("noop").mode("overwrite").save()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=10_000)
    parser.add_argument("--words", type=int, default=40)
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()

    spark = get_spark(app_name="ackfold-bench-tracking-steps", quiet=True)
    jvm_cpu = CpuClock(spark).jvm
    counters = SparkCounters(spark)

    results: dict[str, dict[str, float]] = {}

    def step(label: str, run: Callable[[], None]) -> None:
        run()  # warm-up: JIT, Delta's code paths
        walls, cpus = [], []
        for _ in range(args.runs):
            wall, cpu, before = time.perf_counter(), jvm_cpu(), counters.snapshot()
            run()
            walls.append(time.perf_counter() - wall)
            cpus.append(jvm_cpu() - cpu)
            after = counters.snapshot()
        spark_figures = counters.figures(before, after)  # the last run's
        results[label] = {
            "wall_s": round(min(walls), 3), "cpu_s": round(min(cpus), 3),
            **{k: round(v, 1) for k, v in spark_figures.items()},
        }  # fmt: skip
        print(
            f"{label:34s} {min(walls):6.2f} s  {min(cpus):6.2f} CPU-s  "
            f"{spark_figures['jobs']:3.0f} jobs {spark_figures['stages']:3.0f} stages "
            f"{spark_figures['shuffle_write_bytes']:>12,.0f} shuffle bytes  "
            f"compiled {spark_figures['codegen_classes']:3.0f} classes in "
            f"{spark_figures['codegen_ms']:6.0f} ms",
            flush=True,
        )

    text = " ".join(f"w{i}" for i in range(args.words))
    sentences = spark.range(args.sentences).select(
        F.col("id").cast("string").alias("message_id"), F.lit(text).alias("text")
    )
    spouted = StageTracker("bench", "spout").spout(
        sentences, message_id="message_id", source="bench"
    )
    tuples = spouted.tuples.cache()
    print(f"{args.sentences:,} sentences of {args.words} words, {tuples.count():,} roots")
    split, count = StageTracker("bench", "split"), StageTracker("bench", "count")
    per_tuple = StageTracker("bench", "count", acks="per_tuple")
    work = tempfile.mkdtemp(prefix="ackfold-bench-steps-")
    plain, tracked = f"{work}/untracked", f"{work}/words"

    def save(frame: DataFrame, path: str) -> Callable[[], None]:
        def run() -> None:
            shutil.rmtree(path, ignore_errors=True)
            frame.write.format("delta").save(path)

        return run

    try:
        step(
            "split, untracked",
            save(tuples.select("message_id", F.posexplode(F.split("text", " "))), plain),
        )
        words = split.explode(tuples, F.split("text", " "), "word").select("word", "_ackfold")
        step("split, tracked", save(words, tracked))
        stored = spark.read.format("delta").load(tracked).cache()
        step("split.ack(sentences, words)", noop(split.ack(tuples, stored)))
        if "exploded" in inspect.signature(split.ack).parameters:  # not in older checkouts
            by_array = split.ack(tuples, exploded=F.split("text", " "))
            step("split.ack(sentences, exploded=)", noop(by_array))
        step("count.ack(words), compact", noop(count.ack(stored)))
        step("count.ack(words), per tuple", noop(per_tuple.ack(stored)))

        events = spouted.events.unionByName(split.ack(tuples, stored)).unionByName(
            count.ack(stored)
        )
        open_roots = events.groupBy("root_id").agg(F.bit_xor("ack_val").alias("acc"))
        still_open = open_roots.where(F.col("acc") != 0).count()
        if still_open:
            raise SystemExit(f"{still_open} roots do not complete: the acks are wrong")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {"sentences": args.sentences, "words": args.words, "steps": results}
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
