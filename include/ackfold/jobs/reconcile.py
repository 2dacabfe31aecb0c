"""spark-submit entry point of `ackfold_reconcile` on the Spark engine (`engine.kind:
spark`): fold new ledger events into root_state. On the embedded engine the DAG runs
`ackfold.runs.reconcile.run_reconcile` in its task instead, with no spark-submit.

    spark-submit "$(ackfold spark-app reconcile.py)" [--app APP] [--now ISO-TIME]

Prints the run's JSON summary on the last line of stdout; `run_reconcile` pushes its
counters over OTLP when metrics are on (`ackfold.metrics`).
"""

import argparse
import json

from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.engines import SPARK
from ackfold.jobs import one_line_errors
from ackfold.ledger.reading.parse import parse_time
from ackfold.reconcile.reconciler import check_app_name
from ackfold.runs.reconcile import run_reconcile
from ackfold.spark import get_spark

if __name__ == "__main__":
    with one_line_errors():
        parser = argparse.ArgumentParser(prog="reconcile.py")
        parser.add_argument("--app", type=check_app_name)
        parser.add_argument("--now", type=lambda text: parse_time(text, "--now"))
        args = parser.parse_args()
        settings = load_settings()
        started: list[SparkSession] = []

        def session() -> (
            SparkSession
        ):  # only when there is something to fold: a quiet run starts no Spark
            started.append(get_spark(settings, app_name="ackfold-reconcile"))
            return started[0]

        summary = run_reconcile(
            settings, now=args.now, app=args.app, spark=session, engine=SPARK,
            holder="ackfold_reconcile",
        )  # fmt: skip
        for spark in started:
            spark.stop()
        print(json.dumps(summary, sort_keys=True), flush=True)
