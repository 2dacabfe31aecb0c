"""spark-submit entry point of `ackfold_quality`: the Great Expectations checks of the
ledger and of each app's delivery guarantees.

    spark-submit "$(ackfold spark-app quality.py)" [--app APP] [--now ISO-TIME]
        [--airflow-run-id ID]

Writes one `quality_results` row per expectation (replacing the rows of the same Airflow
run if a retry runs it again), builds Data Docs, and prints the report. A violation is a result,
not an error: it exits 0, and the DAG's `verdict` task fails on it.
"""

import argparse
import json
import sys

from ackfold.config import load_settings
from ackfold.engines import SPARK
from ackfold.jobs import one_line_errors
from ackfold.ledger.reading.parse import parse_time
from ackfold.reconcile.reconciler import check_app_name
from ackfold.runs import run_quality
from ackfold.runs.quality import quality_run_id
from ackfold.spark import get_spark

if __name__ == "__main__":
    with one_line_errors():
        parser = argparse.ArgumentParser(prog="quality.py")
        parser.add_argument("--app", type=check_app_name)
        parser.add_argument("--now", type=lambda text: parse_time(text, "--now"))
        parser.add_argument("--airflow-run-id", help="the DAG run this quality run belongs to")
        args = parser.parse_args()
        settings = load_settings()
        spark = get_spark(settings, app_name="ackfold-quality")
        run_id = quality_run_id(args.airflow_run_id) if args.airflow_run_id else None
        # spark-submitted: the Spark engine, whatever `engine.kind` says.
        report = run_quality(
            settings, spark=spark, engine=SPARK, app=args.app, now=args.now, run_id=run_id,
            say=lambda text: print(text, file=sys.stderr, flush=True),
        )  # fmt: skip
        print(report.format(), flush=True)
        print(json.dumps(report.as_dict(), sort_keys=True), flush=True)
        spark.stop()
