"""spark-submit entry point of `ackfold_reconcile`: fold new ledger events into root_state.
The automatic replay that follows is `spark_apps/replay.py` (`ackfold_replay`).

    spark-submit spark_apps/reconcile.py [--app APP] [--now ISO-TIME]

Prints the run's JSON summary on the last line of stdout, and pushes its counters over
OTLP when metrics are on (`ackfold.metrics`).
"""

import argparse
import json
import sys

from ackfold.config import load_settings
from ackfold.ledger.lease import ledger_turn
from ackfold.ledger.parse import parse_time
from ackfold.metrics import export_run
from ackfold.reconcile.reconciler import check_app_name, reconcile, reconcile_quietly
from ackfold.spark import get_spark

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="reconcile.py")
    parser.add_argument("--app", type=check_app_name)
    parser.add_argument("--now", type=lambda text: parse_time(text, "--now"))
    args = parser.parse_args()
    settings = load_settings()
    # One turn for both: nothing new and no timeout due, the summary comes without a
    # Spark session.
    with ledger_turn(settings, "ackfold_reconcile", say=lambda text: print(text, file=sys.stderr)):
        summary = reconcile_quietly(settings, now=args.now, app=args.app)
        if summary is None:
            spark = get_spark(settings, app_name="ackfold-reconcile")
            summary = reconcile(spark, settings, now=args.now, app=args.app)
            spark.stop()
    export_run(settings, "reconcile", summary)
    print(json.dumps(summary, sort_keys=True), flush=True)
