"""spark-submit entry point of `ackfold_replay`: the automatic replay, under each app's
policy (attempts, backoff, rate), of the failed and timed-out roots a reconcile found.

    spark-submit "$(ackfold spark-app replay.py)" --auto [--app APP] [--now ISO-TIME]

Runs `ackfold.runs.replay.automatic_replay` on the engine `engine.kind` chooses (the
`ackfold_replay` DAG submits it only when that is Spark). Prints the run's JSON summary on
the last line of stdout (and pushes its counters over OTLP when metrics are on). Exits 1
with one line on stderr if messages could not be sent (they stay planned in replay_log:
the next run sends them).
"""

import argparse
import json
import sys

from pyspark.sql import SparkSession

from ackfold.config import load_settings
from ackfold.jobs import one_line_errors
from ackfold.ledger.reading.parse import parse_time
from ackfold.reconcile.reconciler import check_app_name
from ackfold.runs.replay import automatic_replay
from ackfold.runs.replayer import ReplayError
from ackfold.spark import get_spark

if __name__ == "__main__":
    with one_line_errors():
        parser = argparse.ArgumentParser(prog="replay.py")
        parser.add_argument(
            "--auto", action="store_true", required=True, help="follow each app's replay policy"
        )
        parser.add_argument("--app", type=check_app_name, help="only this app's roots")
        parser.add_argument("--now", type=lambda text: parse_time(text, "--now"))
        args = parser.parse_args()
        settings = load_settings()
        started: list[SparkSession] = []

        def session() -> SparkSession:
            started.append(get_spark(settings, app_name="ackfold-replay"))
            return started[0]

        try:
            summary = automatic_replay(settings, app=args.app, now=args.now, spark=session)
        except ReplayError as exc:
            print(f"ackfold replay: {exc}", file=sys.stderr, flush=True)
            sys.exit(1)
        finally:
            for spark in started:
                spark.stop()
        print(json.dumps(summary, sort_keys=True), flush=True)
