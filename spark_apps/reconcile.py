"""spark-submit entry point of `ackfold_reconcile`: fold new ledger events into root_state,
then run the automatic replay (each app's policy: attempts, backoff, rate).

    spark-submit spark_apps/reconcile.py [--app APP] [--now ISO-TIME] [--no-replay]

Prints the run's JSON summary (with the replay's under "replay") on the last line of stdout.
Exits 1 with one line on stderr if replay messages could not be sent.
"""

import argparse
import json
import sys

from ackfold.config import load_settings
from ackfold.ledger_reader import parse_time
from ackfold.reconcile import check_app_name, reconcile
from ackfold.replay import ReplayError, ReplayRequest, replay
from ackfold.spark import get_spark

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="reconcile.py")
    parser.add_argument("--app", type=check_app_name)
    parser.add_argument("--now", type=lambda text: parse_time(text, "--now"))
    parser.add_argument("--no-replay", action="store_true", help="fold only; replay nothing")
    args = parser.parse_args()
    settings = load_settings()
    spark = get_spark(settings, app_name="ackfold-reconcile")
    summary = reconcile(spark, settings, now=args.now, app=args.app)
    if not args.no_replay:
        request = ReplayRequest(automatic=True, app=args.app, requested_by="auto")
        try:
            summary["replay"] = replay(spark, settings, request, now=args.now).as_dict()
        except ReplayError as exc:
            print(json.dumps(summary, sort_keys=True), flush=True)
            print(f"ackfold reconcile: {exc}", file=sys.stderr, flush=True)
            spark.stop()
            sys.exit(1)
    print(json.dumps(summary, sort_keys=True), flush=True)
    spark.stop()
