"""spark-submit entry point of `ackfold_maintenance` on the Spark engine (`engine.kind:
spark`): delete the events of roots completed longer ago than `maintenance.retention`,
Z-order `ack_events` and `roots` by root_id, compact `replay_log`, VACUUM the ledger and
clean up its logs, through `run_maintenance` (the ledger's turn and its epoch, each step
timed, its metrics over OTLP when metrics are on). On the embedded engine the DAG runs
`run_maintenance` in its task instead, with no spark-submit.

    spark-submit "$(ackfold spark-app maintenance.py)" [--now ISO-TIME]

Prints the run's JSON summary on the last line of stdout.
"""

import argparse
import json

from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.engines import SPARK
from ackfold.jobs import one_line_errors
from ackfold.ledger.reading.parse import parse_time
from ackfold.maintenance import run_maintenance
from ackfold.spark import get_spark

if __name__ == "__main__":
    with one_line_errors():
        parser = argparse.ArgumentParser(prog="maintenance.py")
        parser.add_argument("--now", type=lambda text: parse_time(text, "--now"))
        args = parser.parse_args()
        settings = load_settings()
        started: list[SparkSession] = []

        def session() -> SparkSession:  # only where Spark's steps are safe: else delta-rs
            started.append(get_spark(settings, app_name="ackfold-maintenance"))
            return started[0]

        summary = run_maintenance(
            settings, engine=SPARK, spark=session, now=args.now, holder="ackfold_maintenance"
        )
        for spark in started:
            spark.stop()
        print(json.dumps(summary, sort_keys=True, default=str), flush=True)
