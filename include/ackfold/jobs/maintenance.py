"""spark-submit entry point of `ackfold_maintenance`: delete the events of roots completed
longer ago than `maintenance.retention`, Z-order `ack_events` and `roots` by root_id,
compact `replay_log`, and VACUUM the ledger.

    spark-submit "$(ackfold spark-app maintenance.py)" [--now ISO-TIME]

Prints the run's JSON summary on the last line of stdout.
"""

import argparse
import json

from ackfold.config import load_settings
from ackfold.jobs import one_line_errors
from ackfold.ledger.maintenance import maintain
from ackfold.ledger.parse import parse_time
from ackfold.spark import get_spark

if __name__ == "__main__":
    with one_line_errors():
        parser = argparse.ArgumentParser(prog="maintenance.py")
        parser.add_argument("--now", type=lambda text: parse_time(text, "--now"))
        args = parser.parse_args()
        settings = load_settings()
        spark = get_spark(settings, app_name="ackfold-maintenance")
        summary = maintain(spark, settings, now=args.now)
        print(json.dumps(summary, sort_keys=True), flush=True)
        spark.stop()
